"""`--authorization-mode RBAC` for the simulated API server, evaluating as kube-apiserver does.

- rules.py: request attributes and PolicyRule matching (pure).
- authorizer.py: bindings and roles → a decision with kube-apiserver's reason (`PolicyIndex`, pure), and
  `RbacAuthorizer`, the index kept over the store as an `AccessPolicy`.
- aggregation.py: the ClusterRole aggregation controller (`aggregationRule.clusterRoleSelectors`).
- bootstrap.py: the default roles and bindings kube-apiserver creates at start.
"""

from sim.apiserver.rbac.aggregation import ClusterRoleAggregator, aggregated_rules
from sim.apiserver.rbac.authorizer import PolicyIndex, RbacAuthorizer
from sim.apiserver.rbac.bootstrap import ensure_bootstrap_policy
from sim.apiserver.rbac.rules import Attributes, Rule

__all__ = [
    "Attributes",
    "ClusterRoleAggregator",
    "PolicyIndex",
    "RbacAuthorizer",
    "Rule",
    "aggregated_rules",
    "ensure_bootstrap_policy",
]
