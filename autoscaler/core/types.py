"""Plain data for one HPA decision: the snapshot that goes in and the decision that comes out.

Quantities are int milli-values (Go's ``Quantity.MilliValue()``), replica counts are ints that the
algorithm keeps inside the int32 range, and instants are timezone-aware datetimes. Go's zero
``time.Time`` is a real instant (``ZERO_TIME``), not minus infinity: upstream compares against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
MAX_INT32 = 2**31 - 1
MIN_INT32 = -(2**31)
MAX_INT64 = 2**63 - 1

# Metric source types (autoscaling/v2 MetricSourceType).
RESOURCE = "Resource"
CONTAINER_RESOURCE = "ContainerResource"
PODS = "Pods"
OBJECT = "Object"
EXTERNAL = "External"
# The name of a direct PromQL metric (Surge's own) starts so: a hyphen, which no Prometheus metric name
# holds, keeps it apart from the names an adapter serves.
DIRECT_METRIC_PREFIX = "surge-promql:"
# The External metric a formula's value is read as (KEDA's CompositeMetricName, core/composite.py).
COMPOSITE_METRIC = "composite-metric"

# Condition types.
ABLE_TO_SCALE = "AbleToScale"
SCALING_ACTIVE = "ScalingActive"
SCALING_LIMITED = "ScalingLimited"
SCALED_TO_ZERO = "ScaledToZero"
# The pause annotations (both sources): stop acting, or scale to a count and hold it.
PAUSED_ANNOTATION = "autoscaling.surge.dev/paused"
PAUSED_REPLICAS_ANNOTATION = "autoscaling.surge.dev/paused-replicas"
PAUSED_SCALE_IN_ANNOTATION = "autoscaling.surge.dev/paused-scale-in"
PAUSED_SCALE_OUT_ANNOTATION = "autoscaling.surge.dev/paused-scale-out"
FORCE_ACTIVATION_ANNOTATION = "autoscaling.surge.dev/force-activation"


# --- controller configuration -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """Feature switches the algorithm reads, defaulted as kube-controller-manager v1.37 (HPAScaleToZero
    turned beta and on by default there)."""

    hpa_configurable_tolerance: bool = True
    hpa_scale_to_zero: bool = True
    pod_level_resources: bool = True
    hpa_generation: bool = False


# kube-controller-manager's --feature-gates names of the FeatureGates fields.
FEATURE_GATE_NAMES = {
    "HPAConfigurableTolerance": "hpa_configurable_tolerance",
    "HPAScaleToZero": "hpa_scale_to_zero",
    "PodLevelResources": "pod_level_resources",
    "HPAGeneration": "hpa_generation",
}


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Values the upstream controller takes from flags and package variables (production defaults)."""

    tolerance: float = 0.1
    downscale_stabilization_window_s: float = 300.0
    cpu_initialization_period_s: float = 300.0
    initial_readiness_delay_s: float = 30.0
    # The upstream unit-test binary overrides the factor with 8; production uses 2.
    scale_up_limit_factor: float = 2.0
    scale_up_limit_minimum: float = 4.0
    features: FeatureGates = field(default_factory=FeatureGates)


@dataclass(frozen=True, slots=True)
class Tolerances:
    """Per-direction tolerance; a ratio is inside it iff ``1 - scale_down <= r <= 1 + scale_up``."""

    scale_down: float
    scale_up: float

    def is_within(self, ratio: float) -> bool:
        return (1.0 - self.scale_down) <= ratio <= (1.0 + self.scale_up)


# --- pods and metric samples --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    requests: dict[str, int] = field(default_factory=dict)  # resource name -> milli request
    restart_policy: str | None = None  # "Always" marks a restartable (sidecar) init container


@dataclass(frozen=True, slots=True)
class PodCondition:
    status: str  # "True" | "False" | "Unknown"
    last_transition_time: datetime = ZERO_TIME


@dataclass(frozen=True, slots=True)
class Pod:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    phase: str = "Running"
    ready_condition: PodCondition | None = None  # the pod's "Ready" condition, None when absent
    start_time: datetime | None = None
    deletion_timestamp: datetime | None = None
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    pod_level_requests: dict[str, int] | None = None  # pod.spec.resources.requests, milli
    overhead: dict[str, int] = field(default_factory=dict)  # pod.spec.overhead, milli


class PodSample(NamedTuple):
    """One pod's metric value as the metrics clients hand it to the replica calculator."""

    value: int  # milli
    timestamp: datetime = ZERO_TIME
    window: timedelta = timedelta(seconds=60)


# --- answers of the metrics APIs (one per metric spec of the HPA) -------------------------------


@dataclass(frozen=True, slots=True)
class ContainerUsage:
    name: str
    usage: dict[str, int]  # resource name -> milli usage


@dataclass(frozen=True, slots=True)
class PodMetricsItem:
    """One item of a metrics.k8s.io PodMetrics list."""

    pod: str
    timestamp: datetime
    window: timedelta
    containers: tuple[ContainerUsage, ...]


@dataclass(frozen=True, slots=True)
class ResourceMetricsAnswer:
    """metrics.k8s.io PodMetrics list for the scale selector, in API order."""

    items: tuple[PodMetricsItem, ...]


@dataclass(frozen=True, slots=True)
class PodMetricValue:
    pod: str
    value: int  # milli
    timestamp: datetime
    window: timedelta = timedelta(seconds=60)  # the client's default when the API gives none


@dataclass(frozen=True, slots=True)
class PodsMetricAnswer:
    """custom.metrics.k8s.io values of a Pods metric for the scale selector."""

    items: tuple[PodMetricValue, ...]


@dataclass(frozen=True, slots=True)
class ObjectMetricAnswer:
    value: int  # milli
    timestamp: datetime


@dataclass(frozen=True, slots=True)
class ExternalMetricAnswer:
    values: tuple[int, ...]  # milli
    timestamp: datetime
    # A direct metric's query returned no series, and `values` is its absentValue alone.
    absent: bool = False


@dataclass(frozen=True, slots=True)
class MetricFetchError:
    """The metrics API call failed; ``message`` is the client error text (the core wraps it)."""

    message: str


MetricAnswer = (
    ResourceMetricsAnswer | PodsMetricAnswer | ObjectMetricAnswer | ExternalMetricAnswer | MetricFetchError
)


# --- HPA spec (autoscaling/v2) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector as written in a metric spec (kept as data: it is echoed in status)."""

    match_labels: dict[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class MetricIdentifier:
    name: str
    selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class MetricTarget:
    type: str  # "Utilization" | "Value" | "AverageValue"
    value: int | None = None  # milli
    average_value: int | None = None  # milli
    average_utilization: int | None = None  # percent


@dataclass(frozen=True, slots=True)
class CrossVersionObjectReference:
    kind: str
    name: str
    api_version: str = ""


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One entry of ``spec.metrics``; which fields are set depends on ``type``.

    ``name`` is the resource name (Resource/ContainerResource), ``container`` the container name
    (ContainerResource), ``metric`` the metric identifier (Pods/Object/External). ``query`` is Surge's
    own: the PromQL of a direct External metric (named ``DIRECT_METRIC_PREFIX + name``), which the daemon
    sends to Prometheus itself instead of asking the external metrics API; ``absent_value`` (milli, Surge's
    ``absentValue``) is what such a metric reads when its query returns no series (None: it fails then).
    """

    type: str
    target: MetricTarget
    name: str = ""
    container: str = ""
    metric: MetricIdentifier | None = None
    described_object: CrossVersionObjectReference | None = None
    query: str = ""
    absent_value: int | None = None
    # KEDA's activationThreshold (Surge's own, core/activation.py), milli; Object and External metrics only.
    activation_threshold: int | None = None
    # Surge's own `spec.metrics[i].name`: the metric's name in spec.formula (core/composite.py); "" unnamed.
    input_name: str = ""


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    type: str  # "Pods" | "Percent"
    value: int
    period_seconds: int


@dataclass(frozen=True, slots=True)
class ScalingRules:
    stabilization_window_seconds: int | None = None
    select_policy: str | None = None  # "Max" | "Min" | "Disabled"
    policies: tuple[ScalingPolicy, ...] | None = None
    tolerance: float | None = None


@dataclass(frozen=True, slots=True)
class Behavior:
    scale_up: ScalingRules | None = None
    scale_down: ScalingRules | None = None


@dataclass(frozen=True, slots=True)
class Schedule:
    """A scheduled minimum (Surge's own): from each time `cron` fires in `time_zone` (an IANA name, None
    for UTC), for `duration_seconds` of elapsed time, the replica count is at least `min_replicas`."""

    cron: str
    duration_seconds: int
    min_replicas: int
    time_zone: str | None = None


# spec.predictive.mode: the forecast acts (Apply), or is computed and recorded only (ForecastOnly, AWS
# predictive scaling's forecast-only mode: see what it would do before letting it act).
PREDICTIVE_APPLY = "Apply"
PREDICTIVE_FORECAST_ONLY = "ForecastOnly"
PREDICTIVE_MODES = (PREDICTIVE_APPLY, PREDICTIVE_FORECAST_ONLY)
# spec.predictive.maxForecastError's default: a recent error above a fifth means the pattern broke.
DEFAULT_MAX_FORECAST_ERROR = 0.2


@dataclass(frozen=True, slots=True)
class Predictive:
    """Predictive scaling (Surge's own, core/predictive.py): each metric is forecast `horizon_seconds` ahead
    from its last `lookback_seconds` of history, with these seasons; the algorithm reads the higher of the
    current value and the forecast, and the pods the forecast needs are a floor of its proposal.
    `history_query` is the PromQL of the history when the metric has none of its own (the daemon's;
    `surge simulate` reads the series)."""

    lookback_seconds: int
    horizon_seconds: int
    seasons_seconds: tuple[int, ...]
    history_query: str | None = None
    mode: str = PREDICTIVE_APPLY  # ForecastOnly: the forecast is recorded, never read nor a floor
    max_forecast_error: float = DEFAULT_MAX_FORECAST_ERROR  # the recent error above which none is read


@dataclass(frozen=True, slots=True)
class Burst:
    """Burst mode (Surge's own, core/burst.py): each Pods/Object/External metric is also read over the last
    `window_seconds`; when that reaches `threshold` x target, the autoscaler scales up at once on it."""

    window_seconds: int
    threshold: float


FALLBACK_BEHAVIORS = ("static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower")


@dataclass(frozen=True, slots=True)
class Fallback:
    """KEDA's fallback (Surge's own, core/fallback.py): after `failure_threshold` consecutive reconciles with
    a failed metric read, the target goes to the count `behavior` makes of `replicas`."""

    failure_threshold: int
    replicas: int
    behavior: str = "static"


@dataclass(frozen=True, slots=True)
class Pause:
    """The pause annotations (Surge's own, KEDA's semantics): stop acting (`replicas` None), or scale the
    target to `replicas` and hold it there."""

    replicas: int | None = None
    note: str = ""  # why a value that is not a boolean pauses (KEDA: any such value pauses)


@dataclass(frozen=True, slots=True)
class Overrides:
    """The direction annotations (Surge's own, KEDA 2.18's semantics, core/overrides.py): no scale down, no
    scale up, or the target counts as active. `notes` say which values were not booleans (read as true)."""

    scale_in_paused: bool = False
    scale_out_paused: bool = False
    force_activation: bool = False
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Cooldown:
    """KEDA's cooldownPeriod and initialCooldownPeriod (Surge's own, core/cooldown.py), in seconds. A
    `period_seconds` of None (an initial cooldown alone) is a spec the API refuses (validation.py)."""

    period_seconds: int | None
    initial_period_seconds: int = 0


@dataclass(frozen=True, slots=True)
class FormulaSpec:
    """KEDA's advanced.scalingModifiers (Surge's own `spec.formula`, core/composite.py): `expression` over the
    named metrics, read as an External metric with `target` (type Value or AverageValue); its
    `activation_target` (milli) is that metric's activation threshold."""

    expression: str
    target: MetricTarget
    activation_target: int | None = None


@dataclass(frozen=True, slots=True)
class HPASpec:
    scale_target_ref: CrossVersionObjectReference
    max_replicas: int
    min_replicas: int | None = None
    metrics: tuple[MetricSpec, ...] = ()
    behavior: Behavior | None = None
    schedules: tuple[Schedule, ...] = ()  # Surge's own: spec.schedules, or the schedules annotation
    predictive: Predictive | None = None  # Surge's own: spec.predictive, or the predictive annotation
    burst: Burst | None = None  # Surge's own: spec.burst, or the burst annotation
    fallback: Fallback | None = None  # Surge's own: spec.fallback, or the fallback annotation
    pause: Pause | None = None  # Surge's own: the pause annotations
    overrides: Overrides = field(default_factory=Overrides)  # Surge's own: the direction annotations
    cooldown: Cooldown | None = None  # Surge's own: spec.cooldownPeriodSeconds, or the cooldown annotation
    formula: FormulaSpec | None = None  # Surge's own: spec.formula, or the formula annotation


# --- HPA status ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MilliQuantity:
    """A status quantity: its milli value and the format the controller gives it."""

    milli: int
    # Kubernetes compares quantities by value only, so the format takes no part in equality.
    format: str = field(default="DecimalSI", compare=False)  # "DecimalSI" | "BinarySI"


@dataclass(frozen=True, slots=True)
class MetricValueStatus:
    value: MilliQuantity | None = None
    average_value: MilliQuantity | None = None
    average_utilization: int | None = None


@dataclass(frozen=True, slots=True)
class MetricStatus:
    """One entry of ``status.currentMetrics``. A failed metric leaves a zero entry (``type == ""``)."""

    type: str = ""
    current: MetricValueStatus | None = None
    name: str = ""
    container: str = ""
    metric: MetricIdentifier | None = None
    described_object: CrossVersionObjectReference | None = None


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str
    last_transition_time: datetime


@dataclass(frozen=True, slots=True)
class HPAStatus:
    current_replicas: int = 0
    desired_replicas: int = 0
    last_scale_time: datetime | None = None
    current_metrics: tuple[MetricStatus, ...] | None = None
    conditions: tuple[Condition, ...] = ()
    observed_generation: int | None = None
    # Surge's own (core/cooldown.py): the last reconcile that found the target active.
    last_active_time: datetime | None = None


@dataclass(frozen=True, slots=True)
class HPA:
    namespace: str
    name: str
    spec: HPASpec
    status: HPAStatus = field(default_factory=HPAStatus)
    generation: int = 0
    created: datetime | None = None  # metadata.creationTimestamp

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Scale:
    """The scale subresource of the target (autoscaling/v1 Scale)."""

    spec_replicas: int
    status_replicas: int
    selector: str  # status.selector, the serialized label selector ("" when missing)


# --- memory carried between decisions -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recommendation:
    replicas: int
    timestamp: datetime


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    replica_change: int  # always a positive magnitude
    timestamp: datetime
    outdated: bool = False


@dataclass(frozen=True, slots=True)
class History:
    """What the controller remembers per HPA between decisions.

    ``recommendations is None`` means "never reconciled" (the controller then seeds it with the
    current replica count); an empty tuple is a different, valid state.
    """

    recommendations: tuple[Recommendation, ...] | None = None
    scale_up_events: tuple[ScaleEvent, ...] = ()
    scale_down_events: tuple[ScaleEvent, ...] = ()
    burst: BurstState | None = None  # Surge's own: the burst mode's state (core/burst.py); None: not in one
    # Surge's own: consecutive reconciles with a failed metric read (core/fallback.py).
    failed_reads: int = 0


@dataclass(frozen=True, slots=True)
class BurstState:
    """A burst in progress (core/burst.py): since when, the highest count it reached, and since when the
    normal window has agreed with the short one (None: it does not)."""

    since: datetime
    peak: int
    agreed_since: datetime | None = None


# --- the snapshot and the decision --------------------------------------------------------------


class Prediction(NamedTuple):
    """What a metric's history said at one instant (core/predictive.py): the forecast (the peak over the
    horizon, in the history's unit), the recent error, whether the algorithm read it, why or why not, and
    `cause`, the PredictiveActive condition's reason for it."""

    forecast: float | None
    error: float | None
    used: bool
    reason: str
    cause: str = "NoHistory"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one reconcile of one HPA reads.

    ``pods`` are the pods the scale's selector selects in the HPA's namespace (the pod lister's
    answer). ``metric_answers[i]`` answers ``hpa.spec.metrics[i]`` (after defaulting, see
    ``effective_metrics``). ``other_selectors`` maps the keys ("ns/name") of the other autoscalers
    in the namespace to their scale selectors, for the ambiguous-selector check.
    """

    hpa: HPA
    scale: Scale
    pods: tuple[Pod, ...]
    metric_answers: tuple[MetricAnswer, ...]
    now: datetime
    history: History = field(default_factory=History)
    config: ControllerConfig = field(default_factory=ControllerConfig)
    other_selectors: dict[str, str] = field(default_factory=dict)
    # Surge's own (spec.predictive, core/predictive.py): per metric, the forecast the algorithm uses, in
    # the metric's unit (None: none used); the pods it needs are a floor of the proposal.
    forecasts: tuple[float | None, ...] = ()
    # Per metric, what its forecast said, used or not (core/predictive.py); the PredictiveActive condition
    # reports it. () with spec.predictive: not told (the condition is left as it is).
    predictions: tuple[Prediction, ...] = ()


@dataclass(frozen=True, slots=True)
class Event:
    type: str  # "Normal" | "Warning"
    reason: str
    message: str


# --- how the decision came about (for explanations; upstream keeps none of it) ------------------
# Named tuples rather than frozen dataclasses: decide() builds them on every call, at a third of the cost.


class StabilizationTrace(NamedTuple):
    """The stabilization step: the metrics' proposal in, the stabilized count out, and the counts each
    window held (this proposal included). The scale-up window's lowest and the scale-down window's
    highest count bound the result; without a behavior there is no scale-up window (``None``)."""

    proposal: int
    replicas: int
    scale_up_window_s: float | None
    scale_down_window_s: float
    scale_up_recommendations: tuple[int, ...]
    scale_down_recommendations: tuple[int, ...]


class LimitsTrace(NamedTuple):
    """The limits step: the bounds, the rate rules of the change's direction and which one limited.

    ``policies``/``select_policy`` are the behavior's rules for the direction of the change (empty/None
    without a behavior or without a change). ``rate_limit`` is the bound the rate rules set (the highest
    count scaling up, the lowest scaling down; None when they set none) and ``limiting_policy`` the policy
    that gave it (None without a behavior or with ``selectPolicy: Disabled``). ``reason`` is the
    ScalingLimited condition's reason.
    """

    min_replicas: int
    max_replicas: int
    policies: tuple[ScalingPolicy, ...]
    select_policy: str | None
    rate_limit: int | None
    limiting_policy: ScalingPolicy | None
    replicas: int
    reason: str


class BurstTrace(NamedTuple):
    """What a burst check saw (core/burst.py): the metric with the highest short-window usage ratio (value
    / target), the count the short window proposes, the count the check set (after maxReplicas and the
    scale-up policies), the burst's peak, and whether the target is in burst after the check."""

    window_seconds: int
    threshold: float
    metric: str
    ratio: float | None
    proposal: int | None
    current: int  # the count before the check
    replicas: int
    peak: int
    in_burst: bool
    entered: bool = False  # the burst began at this check
    left: bool = False  # the burst ended at this check


class FormulaTrace(NamedTuple):
    """The formula step (core/composite.py): each input's value as read (None: its read failed), the
    formula's value (None: it could not be computed, `error` says why) and its target."""

    expression: str
    inputs: tuple[tuple[str, float | None], ...]
    value: float | None
    target: MetricTarget
    error: str = ""


class Readiness(NamedTuple):
    """The readiness correction of a Pods or Resource metric (the HPA's second pass), when it ran: pods
    without a usable sample get an assumed value, and the ratio is taken again over all of them. Scaling
    up, unready and missing pods count as idle; scaling down, missing pods count as using the target (a
    Resource utilization: their whole request)."""

    ready: int  # pods whose samples counted as read
    unready: int  # unready pods counted as idle (scaling up only)
    missing: int  # pods without a sample, counted at the assumed value
    ratio: float  # the usage ratio over all of them


class Trace(NamedTuple):
    """The derivation of a decision. Per effective metric: its usage ratio (current / target, before the
    tolerance and the readiness corrections), the readiness correction when it ran, and the count it
    proposed, None when it failed. Then stabilization and limits, None when no replica count could be
    computed."""

    tolerances: Tolerances
    ratios: tuple[float | None, ...]
    proposals: tuple[int | None, ...]
    stabilization: StabilizationTrace | None = None
    limits: LimitsTrace | None = None
    readiness: tuple[Readiness | None, ...] = ()
