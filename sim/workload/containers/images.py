"""Which local image a pod's `image:` names: Kubernetes reads `surge:0.1.0` as
`docker.io/library/surge:0.1.0`, while `podman build -t surge:0.1.0` stores `localhost/surge:0.1.0`.
Pure string work; the kubelet looks the candidates up in local storage in order and never pulls.

`names_registry` tells a reference a cluster would pull from somewhere (`registry.k8s.io/x:v1`) from a
bare name such as `web`, which the simulation models: a pod of bare names none of which is in local
storage keeps the modelled life, while one naming a registry fails to pull, as on a cluster without it.
"""

from __future__ import annotations

DEFAULT_REGISTRY = "docker.io"


def _split_registry(image: str) -> tuple[str, str]:
    """(registry, path): the first component is a registry when it has a dot or a port, or is localhost."""
    first, slash, rest = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "", image


def names_registry(image: str) -> bool:
    return _split_registry(image.strip())[0] != ""


def with_tag(image: str) -> str:
    """`name` → `name:latest`; a tag or a digest is kept."""
    last = image.rsplit("/", 1)[-1]
    return image if ":" in last or "@" in last else f"{image}:latest"


def image_references(image: str) -> list[str]:
    """The references to look up for `image`, most specific first, without duplicates."""
    tagged = with_tag(image.strip())
    registry, path = _split_registry(tagged)
    if registry not in ("", DEFAULT_REGISTRY, "localhost"):
        return [tagged]
    short = path.removeprefix("library/") if registry in ("", DEFAULT_REGISTRY) else path
    hub = short if "/" in short else f"library/{short}"  # Docker Hub's official images live in library/
    candidates = [tagged, f"localhost/{short}", f"{DEFAULT_REGISTRY}/{hub}"]
    return list(dict.fromkeys(candidates))
