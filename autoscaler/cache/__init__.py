"""Watch-based caches: a generic informer (list + watch), its store, and the pod cache's label index."""

from autoscaler.cache.informer import EventHandlers, Informer
from autoscaler.cache.pods import PodIndex, pod_of, slim_pod
from autoscaler.cache.store import Store

__all__ = ["EventHandlers", "Informer", "PodIndex", "Store", "pod_of", "slim_pod"]
