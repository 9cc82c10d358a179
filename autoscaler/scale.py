"""The scale subresource of any kind that has one: read it, and update replicas retrying on 409."""

from __future__ import annotations

from shared.kube import ApiError, KubeClient, MappingError, Obj, RestMapper, WriteFence

# client-go's retry.DefaultRetry makes 5 attempts.
CONFLICT_ATTEMPTS = 5


class ScaleError(Exception):
    pass


async def scale_path(mapper: RestMapper, api_version: str, kind: str, namespace: str, name: str) -> str:
    try:
        mapping = await mapper.mapping(api_version, kind)
    except MappingError as err:
        raise ScaleError(f"unable to determine resource for scale target reference: {err}") from err
    return mapping.path(namespace, name, "scale")


async def read_scale(client: KubeClient, path: str) -> Obj:
    return await client.get(path)


async def update_replicas(
    client: KubeClient, path: str, scale: Obj, replicas: int, fence: WriteFence | None = None
) -> tuple[Obj, int]:
    """PUT `replicas` on the scale; on 409 re-read and try again. Returns the written scale and attempts.
    Every PUT asks `fence` right before it is sent (WriteDropped when it does not admit it)."""
    attempt = 1
    while True:
        body = {**scale, "spec": {**(scale.get("spec") or {}), "replicas": replicas}}
        try:
            return await client.request("PUT", path, body=body, fence=fence), attempt
        except ApiError as err:
            if err.code != 409 or attempt >= CONFLICT_ATTEMPTS:
                raise
        attempt += 1
        scale = await client.get(path)
