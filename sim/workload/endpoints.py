"""kube-controller-manager's endpoints and EndpointSlice controllers: each Service with a selector gets
an Endpoints object and EndpointSlices listing the pods it selects.

The aggregator finds an APIService's backend through them (kube-aggregator reads EndpointSlices), so a
readiness change of the backend's pods reaches the APIService's `Available` condition as in a cluster:
- v1 Endpoints (the endpoints controller): ready pods in `subsets[].addresses`, not-ready ones in
  `notReadyAddresses`; terminating pods are left out. Subsets group the pods whose ports resolve alike.
- discovery.k8s.io/v1 EndpointSlices (the endpointslice controller): every pod with an IP, with
  `ready`/`serving`/`terminating` conditions, one slice per distinct port list (a Service whose pods
  are all gone keeps one empty placeholder slice). Slices are owned by the Service, so deleting it
  takes them along; the Endpoints object is deleted by this controller.
Ports come from each Service port's `targetPort`: a number as is, a name looked up among the pod's
container ports; a pod lacking the named port is left out of that port only.

A Service without a selector gets no Endpoints from here: whoever runs its backends writes them. Its
Endpoints are mirrored into EndpointSlices (the endpointslicemirroring controller: `addresses` ready,
`notReadyAddresses` not, slices owned by the Endpoints), so a hand-written Endpoints reaches the
aggregator too. Reconciles run on the event loop after the store's listeners return.
"""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Callable, Iterable

import structlog

from sim.apiserver.errors import ApiError
from sim.apiserver.resources import GroupResource, Obj
from sim.apiserver.selection import Selection
from sim.apiserver.store import Store
from sim.workload.keyqueue import KeyQueue
from sim.workload.pods import is_ready, is_terminating

log = structlog.get_logger(__name__)

SERVICES: GroupResource = ("", "services")
PODS: GroupResource = ("", "pods")
ENDPOINTS: GroupResource = ("", "endpoints")
ENDPOINTSLICES: GroupResource = ("discovery.k8s.io", "endpointslices")
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
SLICE_MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
SLICE_CONTROLLER = "endpointslice-controller.k8s.io"
MIRRORING_CONTROLLER = "endpointslicemirroring-controller.k8s.io"
SKIP_MIRROR_LABEL = "endpointslice.kubernetes.io/skip-mirror"
LEADER_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
ENDPOINTS_MANAGED_BY_LABEL = "endpoints.kubernetes.io/managed-by"
ENDPOINTS_CONTROLLER = "endpoint-controller"
HEADLESS_LABEL = "service.kubernetes.io/headless"

ServiceKey = tuple[str, str]  # (namespace, name)
# One resolved port as the slice and Endpoints port entries carry it: (name, port, protocol, appProtocol).
PortKey = tuple[str, int, str, str | None]
# What one EndpointSlice holds: (addressType, its ports); ports None is the Service's empty placeholder.
SliceKey = tuple[str, tuple[PortKey, ...] | None]


def _selects(selector: dict[str, str], pod: Obj) -> bool:
    labels = pod.get("metadata", {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _container_port(pod: Obj, name: str, protocol: str) -> int | None:
    """podutil.FindPort for a named targetPort: app containers, then sidecar (restartable init) ones."""
    spec = pod.get("spec", {})
    sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    for container in itertools.chain(spec.get("containers") or [], sidecars):
        for port in container.get("ports") or []:
            if port.get("name") == name and port.get("protocol", "TCP") == protocol:
                return int(port["containerPort"])
    return None


def _pod_ports(service: Obj, pod: Obj) -> tuple[PortKey, ...]:
    ports: list[PortKey] = []
    for service_port in service["spec"].get("ports") or []:
        protocol = service_port.get("protocol", "TCP")
        target = service_port.get("targetPort", service_port.get("port"))
        number = target if isinstance(target, int) else _container_port(pod, str(target), protocol)
        if number is None:
            continue  # the real controllers log "failed to find port" and skip just this port
        ports.append((service_port.get("name", ""), number, protocol, service_port.get("appProtocol")))
    return tuple(sorted(ports))


def _port_entry(port: PortKey, named_always: bool) -> Obj:
    name, number, protocol, app_protocol = port
    entry: Obj = {"name": name} if name or named_always else {}
    entry.update({"port": number, "protocol": protocol})
    if app_protocol:
        entry["appProtocol"] = app_protocol
    return entry


def _target_ref(pod: Obj) -> Obj:
    meta = pod["metadata"]
    return {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]}


def _address(pod: Obj) -> Obj:
    address: Obj = {"ip": pod["status"]["podIP"]}
    if pod.get("spec", {}).get("nodeName"):
        address["nodeName"] = pod["spec"]["nodeName"]
    address["targetRef"] = _target_ref(pod)
    return address


def _slice_endpoint(pod: Obj, publish_not_ready: bool) -> Obj:
    ready, terminating = is_ready(pod), is_terminating(pod)
    endpoint: Obj = {
        "addresses": [pod["status"]["podIP"]],
        "conditions": {
            "ready": publish_not_ready or (ready and not terminating),
            "serving": publish_not_ready or ready,
            "terminating": terminating,
        },
    }
    if pod.get("spec", {}).get("nodeName"):
        endpoint["nodeName"] = pod["spec"]["nodeName"]
    endpoint["targetRef"] = _target_ref(pod)
    return endpoint


def _has_endpoint(pod: Obj) -> bool:
    """endpointutil.ShouldPodBeInEndpoints (terminating pods included; the Endpoints path drops them)."""
    status = pod.get("status") or {}
    return bool(status.get("podIP")) and status.get("phase") not in ("Succeeded", "Failed")


def _by_ip(entries: Iterable[Obj], ip: Callable[[Obj], str]) -> list[Obj]:
    def key(entry: Obj) -> tuple[int, int]:
        address = ipaddress.ip_address(ip(entry))
        return address.version, int(address)

    return sorted(entries, key=key)


def _port_keys(ports: list[Obj]) -> tuple[PortKey, ...]:
    return tuple(sorted((p.get("name", ""), p.get("port", 0), p.get("protocol", "TCP"), p.get("appProtocol"))
                        for p in ports))


def _slice_key(endpoint_slice: Obj) -> SliceKey:
    ports = endpoint_slice.get("ports")
    return endpoint_slice.get("addressType", "IPv4"), None if ports is None else _port_keys(ports)


def _mirrored_endpoint(address: Obj, ready: bool) -> tuple[str, Obj] | None:
    """An Endpoints address as a slice endpoint and its addressType (None: not an IP, not mirrored)."""
    try:
        ip = ipaddress.ip_address(address.get("ip", ""))
    except ValueError:
        return None
    endpoint: Obj = {"addresses": [str(ip)], "conditions": {"ready": ready}}
    for field in ("nodeName", "targetRef", "hostname"):
        if address.get(field):
            endpoint[field] = address[field]
    return ("IPv4" if ip.version == 4 else "IPv6"), endpoint


class EndpointsController:
    """Start and use it on the API server's event loop thread (the store is not thread-safe)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._queue: KeyQueue[ServiceKey] = KeyQueue(lambda key: self.reconcile(*key), "endpoints")
        self._remove_listener: Callable[[], None] | None = None
        # Each Service's selected pods at its last reconcile: a pod whose labels stop matching still
        # has to leave that Service's endpoints, and the listener sees only the new labels.
        self._members: dict[ServiceKey, set[str]] = {}

    def start(self) -> None:
        self._remove_listener = self._store.add_listener(self._on_change)
        for service in self._store.select(SERVICES, Selection()):
            self._queue.add((service["metadata"]["namespace"], service["metadata"]["name"]))

    def stop(self) -> None:
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        self._queue.close()

    # ---- events --------------------------------------------------------------------------------

    def _on_change(self, event: str, gr: GroupResource, obj: Obj) -> None:
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace", "")
        if gr == SERVICES:
            self._queue.add((namespace, meta["name"]))
        elif gr == PODS:
            for service in self._store.select(SERVICES, Selection(namespace)):
                key = (namespace, service["metadata"]["name"])
                selector = service.get("spec", {}).get("selector")
                if (selector and _selects(selector, obj)) or meta["name"] in self._members.get(key, ()):
                    self._queue.add(key)
        elif gr == ENDPOINTS:
            # Our own writes need no second look; a deletion does (recreated while the Service selects
            # pods), and so does anyone else's Endpoints (mirrored into slices for a selector-less Service).
            managed_by = (meta.get("labels") or {}).get(ENDPOINTS_MANAGED_BY_LABEL)
            if event == "DELETED" or managed_by != ENDPOINTS_CONTROLLER:
                self._queue.add((namespace, meta["name"]))
        elif event == "DELETED" and gr == ENDPOINTSLICES:
            service_name = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
            if service_name:
                self._queue.add((namespace, service_name))


    # ---- reconcile -----------------------------------------------------------------------------

    def reconcile(self, namespace: str, name: str) -> None:
        """Bring the Service's Endpoints and EndpointSlices in line with its pods (or Endpoints) now."""
        try:
            service = self._store.get_ref(SERVICES, namespace, name)
        except ApiError as err:
            if err.code != 404:
                raise
            self._members.pop((namespace, name), None)
            self._delete_endpoints(namespace, name)
            self._delete_slices(namespace, name, MIRRORING_CONTROLLER)
            return
        selector = service.get("spec", {}).get("selector")
        if not selector:
            self._members.pop((namespace, name), None)
            self._mirror(namespace, name)
            return
        pods = [p for p in self._store.select(PODS, Selection(namespace)) if _selects(selector, p)]
        self._members[(namespace, name)] = {p["metadata"]["name"] for p in pods}
        with_ip = [p for p in pods if _has_endpoint(p)]
        self._write_endpoints(service, with_ip)
        self._write_slices(service, with_ip)
        self._delete_slices(namespace, name, MIRRORING_CONTROLLER)

    def _service_labels(self, service: Obj) -> dict[str, str]:
        labels = dict(service["metadata"].get("labels") or {})
        if service["spec"].get("clusterIP") == "None":
            labels[HEADLESS_LABEL] = ""
        return labels

    def _write_endpoints(self, service: Obj, pods: list[Obj]) -> None:
        meta, spec = service["metadata"], service["spec"]
        publish_not_ready = bool(spec.get("publishNotReadyAddresses"))
        # Endpoints keep no ports at all only for a headless Service that declares none.
        portless = not spec.get("ports") and spec.get("clusterIP") == "None"
        subsets: dict[tuple[PortKey, ...], tuple[list[Obj], list[Obj]]] = {}
        for pod in pods:
            if is_terminating(pod):
                continue
            ports = _pod_ports(service, pod)
            if not ports and not portless:
                continue
            ready, not_ready = subsets.setdefault(ports, ([], []))
            (ready if publish_not_ready or is_ready(pod) else not_ready).append(_address(pod))
        desired: list[Obj] = []
        for ports, (ready, not_ready) in sorted(subsets.items()):
            subset: Obj = {}
            if ready:
                subset["addresses"] = _by_ip(ready, lambda a: str(a["ip"]))
            if not_ready:
                subset["notReadyAddresses"] = _by_ip(not_ready, lambda a: str(a["ip"]))
            if ports:
                subset["ports"] = [_port_entry(p, named_always=False) for p in ports]
            desired.append(subset)
        labels = {**self._service_labels(service), ENDPOINTS_MANAGED_BY_LABEL: ENDPOINTS_CONTROLLER}
        try:
            current = self._store.get_ref(ENDPOINTS, meta["namespace"], meta["name"])
        except ApiError as err:
            if err.code != 404:
                raise
            new: Obj = {"metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": labels}}
            if desired:
                new["subsets"] = desired
            self._store.create(ENDPOINTS, new)
            return
        updated: Obj = {k: v for k, v in current.items() if k != "subsets"}
        updated["metadata"] = {**current["metadata"], "labels": labels}
        if desired:
            updated["subsets"] = desired
        self._store.update(ENDPOINTS, updated)  # a no-op write when nothing changed

    def _write_slices(self, service: Obj, pods: list[Obj]) -> None:
        meta, spec = service["metadata"], service["spec"]
        publish_not_ready = bool(spec.get("publishNotReadyAddresses"))
        desired: dict[SliceKey, list[Obj]] = {}
        for pod in pods:
            key = ("IPv4", _pod_ports(service, pod))
            desired.setdefault(key, []).append(_slice_endpoint(pod, publish_not_ready))
        if not desired:
            desired[("IPv4", None)] = []  # the placeholder: the Service exists but selects no pod with an IP
        owner = {"apiVersion": "v1", "kind": "Service", "name": meta["name"], "uid": meta["uid"],
                 "controller": True, "blockOwnerDeletion": True}
        self._sync_slices(meta["namespace"], meta["name"], SLICE_CONTROLLER, desired,
                          self._service_labels(service), owner)

    def _mirror(self, namespace: str, name: str) -> None:
        """The endpointslicemirroring controller: a selector-less Service's Endpoints as slices."""
        try:
            endpoints = self._store.get_ref(ENDPOINTS, namespace, name)
        except ApiError as err:
            if err.code != 404:
                raise
            self._delete_slices(namespace, name, MIRRORING_CONTROLLER)
            return
        meta = endpoints["metadata"]
        labels = dict(meta.get("labels") or {})
        desired: dict[SliceKey, list[Obj]] = {}
        leader_record = LEADER_ANNOTATION in (meta.get("annotations") or {})
        if labels.get(SKIP_MIRROR_LABEL) != "true" and not leader_record:
            for subset in endpoints.get("subsets") or []:
                ports = _port_keys(subset.get("ports") or [])
                for field, ready in (("addresses", True), ("notReadyAddresses", False)):
                    for address in subset.get(field) or []:
                        if (mirrored := _mirrored_endpoint(address, ready)) is not None:
                            desired.setdefault((mirrored[0], ports), []).append(mirrored[1])
        owner = {"apiVersion": "v1", "kind": "Endpoints", "name": name, "uid": meta["uid"],
                 "controller": True, "blockOwnerDeletion": True}
        self._sync_slices(namespace, name, MIRRORING_CONTROLLER, desired, labels, owner)

    def _sync_slices(
        self, namespace: str, service_name: str, controller: str, desired: dict[SliceKey, list[Obj]],
        labels: dict[str, str], owner: Obj,
    ) -> None:
        """Make `controller`'s slices for the Service exactly `desired`: one per (addressType, ports)."""
        labels = {**labels, SERVICE_NAME_LABEL: service_name, SLICE_MANAGED_BY_LABEL: controller}
        existing = {_slice_key(s): s for s in self._slices_of(namespace, service_name, controller)}
        for key, endpoints in sorted(desired.items(), key=lambda item: (item[0][0], item[0][1] or ())):
            address_type, ports = key
            body: Obj = {
                "addressType": address_type,
                "endpoints": _by_ip(endpoints, lambda e: str(e["addresses"][0])),
                "ports": None if ports is None else [_port_entry(p, named_always=True) for p in ports],
            }
            current = existing.pop(key, None)
            if current is None:
                self._store.create(ENDPOINTSLICES, {
                    "metadata": {"generateName": f"{service_name}-", "namespace": namespace, "labels": labels,
                                 "ownerReferences": [owner]},
                    **body,
                })
            else:
                self._store.update(ENDPOINTSLICES, {
                    **current, "metadata": {**current["metadata"], "labels": labels}, **body,
                })
        for stale in existing.values():
            self._delete(ENDPOINTSLICES, namespace, stale["metadata"]["name"])

    def _slices_of(self, namespace: str, service_name: str, controller: str) -> list[Obj]:
        selector = f"{SERVICE_NAME_LABEL}={service_name},{SLICE_MANAGED_BY_LABEL}={controller}"
        return self._store.select(ENDPOINTSLICES, Selection(namespace, selector))

    def _delete_slices(self, namespace: str, service_name: str, controller: str) -> None:
        for endpoint_slice in self._slices_of(namespace, service_name, controller):
            self._delete(ENDPOINTSLICES, namespace, endpoint_slice["metadata"]["name"])

    def _delete_endpoints(self, namespace: str, name: str) -> None:
        """The Service is gone: so are the Endpoints and slices this controller wrote for it."""
        try:
            endpoints = self._store.get_ref(ENDPOINTS, namespace, name)
        except ApiError as err:
            if err.code != 404:
                raise
        else:
            labels = endpoints["metadata"].get("labels") or {}
            if labels.get(ENDPOINTS_MANAGED_BY_LABEL) == ENDPOINTS_CONTROLLER:
                self._delete(ENDPOINTS, namespace, name)
        self._delete_slices(namespace, name, SLICE_CONTROLLER)

    def _delete(self, gr: GroupResource, namespace: str, name: str) -> None:
        try:
            self._store.delete(gr, namespace, name)
        except ApiError as err:
            if err.code != 404:
                raise
