{{/*
Names. The adapter's objects are named as the prometheus-community prometheus-adapter chart names them, so
that `helm upgrade` of one of its releases to this chart updates each object in place (a Deployment's
selector cannot change): the name part defaults to "prometheus-adapter", not to this chart's name.
*/}}
{{- define "surge.adapter.name" -}}
{{- default "prometheus-adapter" .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "surge.adapter.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default "prometheus-adapter" .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "surge.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "surge.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "surge.adapter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "surge.adapter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of every adapter object: the upstream chart's set, customLabels last. */}}
{{- define "surge.adapter.labels" -}}
helm.sh/chart: {{ include "surge.chart" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: metrics
app.kubernetes.io/part-of: {{ include "surge.adapter.name" . }}
{{ include "surge.adapter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- with .Values.customLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.annotations from customAnnotations and the mappings given, or nothing when all are empty. */}}
{{- define "surge.annotations" -}}
{{- $all := dict -}}
{{- range . }}{{ $all = merge $all (. | default dict) }}{{ end -}}
{{- with $all -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* metadata.labels and annotations of an adapter object. */}}
{{- define "surge.adapter.metadata" -}}
labels:
  {{- include "surge.adapter.labels" . | nindent 2 }}
{{- with include "surge.annotations" (list .Values.customAnnotations) }}
{{ . }}
{{- end }}
{{- end -}}

{{- define "surge.adapter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "surge.adapter.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The subject of the adapter's bindings. */}}
{{- define "surge.adapter.subject" -}}
- kind: ServiceAccount
  name: {{ include "surge.adapter.serviceAccountName" . }}
  namespace: {{ include "surge.namespace" . | quote }}
{{- end -}}

{{/* A values file written for the prometheus-adapter chart often names its image
(registry.k8s.io/prometheus-adapter/prometheus-adapter, directxman12/k8s-prometheus-adapter-amd64, ...), whose
binary would crash-loop on Surge's flags: Surge's own image (surge.image) replaces it, with its tag. */}}
{{- define "surge.upstreamImage" -}}
{{- if contains "prometheus-adapter" (toString .Values.image.repository) }}true{{ end -}}
{{- end -}}

{{- define "surge.image" -}}
{{- $image := ternary .Values.surge.image .Values.image (eq (include "surge.upstreamImage" .) "true") -}}
{{ $image.repository }}:{{ $image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* --prometheus-url as the upstream chart writes it: the templated url, ":<port>" when set, the path. */}}
{{- define "surge.prometheusUrl" -}}
{{ tpl .Values.prometheus.url . }}{{ with .Values.prometheus.port }}:{{ . }}{{ end }}{{ .Values.prometheus.path }}
{{- end -}}

{{/* The serving certificate comes from a Secret (tls.enable, or cert-manager), else the adapter makes its own. */}}
{{- define "surge.adapter.servingSecret" -}}
{{- if or .Values.tls.enable .Values.certManager.enabled }}true{{ end -}}
{{- end -}}

{{/* The custom metrics API is served when any `rules:` are: the default set or custom ones. */}}
{{- define "surge.adapter.customMetrics" -}}
{{- if or .Values.rules.default .Values.rules.custom }}true{{ end -}}
{{- end -}}

{{/*
The autoscaler's objects are Surge's own (the upstream chart has none): named after the release and
"surge-autoscaler", e.g. "surge-autoscaler" for a release "surge", "monitoring-surge-autoscaler" for "monitoring".
*/}}
{{- define "surge.autoscaler.fullname" -}}
{{- if contains "surge" .Release.Name -}}
{{- printf "%s-autoscaler" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-surge-autoscaler" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "surge.autoscaler.selectorLabels" -}}
app.kubernetes.io/name: surge-autoscaler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "surge.autoscaler.labels" -}}
helm.sh/chart: {{ include "surge.chart" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: autoscaler
app.kubernetes.io/part-of: surge
{{ include "surge.autoscaler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- with .Values.customLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "surge.autoscaler.metadata" -}}
labels:
  {{- include "surge.autoscaler.labels" . | nindent 2 }}
{{- with include "surge.annotations" (list .Values.customAnnotations) }}
{{ . }}
{{- end }}
{{- end -}}

{{- define "surge.autoscaler.serviceAccountName" -}}
{{- if .Values.autoscaler.serviceAccount.create -}}
{{- default (include "surge.autoscaler.fullname" .) .Values.autoscaler.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.autoscaler.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "surge.autoscaler.subject" -}}
- kind: ServiceAccount
  name: {{ include "surge.autoscaler.serviceAccountName" . }}
  namespace: {{ include "surge.namespace" . | quote }}
{{- end -}}

{{/* The adapter's flags: prometheus-adapter's as the upstream chart passes them, then Surge's own, then extraArguments. */}}
{{- define "surge.adapter.args" -}}
- --secure-port={{ .Values.listenPort }}
{{- if include "surge.adapter.servingSecret" . }}
- --tls-cert-file=/var/run/serving-cert/tls.crt
- --tls-private-key-file=/var/run/serving-cert/tls.key
{{- end }}
- --cert-dir=/tmp/cert
- --prometheus-url={{ include "surge.prometheusUrl" . }}
- --metrics-relist-interval={{ .Values.metricsRelistInterval }}
{{- /* klog's verbosity: logLevel, or the last `--v=N` of extraArguments, which wins upstream */}}
{{- $verbosity := .Values.logLevel }}
{{- range .Values.extraArguments }}
{{- if regexMatch "^--?v=[0-9]+$" (toString .) }}
{{- $verbosity = regexReplaceAll "^--?v=" (toString .) "" }}
{{- end }}
{{- end }}
- --log-level={{ if ge (int $verbosity) 6 }}debug{{ else }}info{{ end }}
- --config=/etc/adapter/config.yaml
{{- with .Values.surge }}
- --metrics-cache-ttl={{ .metricsCache.ttl }}
- --metrics-cache-max-entries={{ .metricsCache.maxEntries | int64 }}
{{- if .batchNamespaceQueries }}
- --batch-namespace-queries=true
{{- end }}
{{- if .regexEscapeValues }}
- --regex-escape-values=true
{{- end }}
{{- range .delegates }}
- --delegate-url={{ .url }}{{ with .groups }};groups={{ join "," . }}{{ end }}{{ if .fallback }};fallback{{ end }}
{{- end }}
{{- if .delegates }}
{{- with .delegateCaFile }}
- --delegate-ca-file={{ . }}
{{- end }}
{{- with .delegateTokenFile }}
- --delegate-token-file={{ . }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.extraArguments }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
config.yaml: `rules:` (the default set, then rules.custom), `externalRules:`, `resourceRules:`, each only when
it has something, as the upstream chart writes it. A rule written as a map instead of a list item, or rules
written as one string, make the upstream chart write a config.yaml prometheus-adapter refuses at start-up
(a crash-looping pod); here they stop the render with the key to fix.
*/}}
{{- define "surge.adapter.config" -}}
{{- range $key, $kind := dict "custom" "slice" "external" "slice" "resource" "map" -}}
{{- $value := get $.Values.rules $key -}}
{{- if and $value (not (kindIs $kind $value)) -}}
{{- $want := ternary "a list of rules, each an item `- seriesQuery: ...`" "a map of cpu, memory and window" (eq $kind "slice") -}}
{{- fail (printf "rules.%s: %s, not a %s: prometheus-adapter would refuse the config.yaml made of it" $key $want (kindOf $value)) -}}
{{- end -}}
{{- end -}}
{{- $config := dict -}}
{{- $rules := list -}}
{{- if .Values.rules.default -}}
{{- $rules = include "surge.adapter.defaultRules" . | fromYamlArray -}}
{{- end -}}
{{- /* the kind checks again: `helm lint` logs a fail and goes on */ -}}
{{- if kindIs "slice" .Values.rules.custom -}}
{{- $rules = concat $rules .Values.rules.custom -}}
{{- end -}}
{{- with $rules -}}
{{- $_ := set $config "rules" . -}}
{{- end -}}
{{- if and .Values.rules.external (kindIs "slice" .Values.rules.external) -}}
{{- $_ := set $config "externalRules" .Values.rules.external -}}
{{- end -}}
{{- if and .Values.rules.resource (kindIs "map" .Values.rules.resource) -}}
{{- $_ := set $config "resourceRules" .Values.rules.resource -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* prometheus-adapter's default rules (its chart's `rules.default`, and what its config-gen writes). */}}
{{- define "surge.adapter.defaultRules" -}}
- seriesQuery: '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
  seriesFilters: []
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name:
    matches: ^container_(.*)_seconds_total$
    as: ""
  metricsQuery: sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[5m])) by (<<.GroupBy>>)
- seriesQuery: '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
  seriesFilters:
    - isNot: ^container_.*_seconds_total$
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name:
    matches: ^container_(.*)_total$
    as: ""
  metricsQuery: sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[5m])) by (<<.GroupBy>>)
- seriesQuery: '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
  seriesFilters:
    - isNot: ^container_.*_total$
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name:
    matches: ^container_(.*)$
    as: ""
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>,container!="POD"}) by (<<.GroupBy>>)
- seriesQuery: '{namespace!="",__name__!~"^container_.*"}'
  seriesFilters:
    - isNot: .*_total$
  resources:
    template: <<.Resource>>
  name:
    matches: ""
    as: ""
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
- seriesQuery: '{namespace!="",__name__!~"^container_.*"}'
  seriesFilters:
    - isNot: .*_seconds_total
  resources:
    template: <<.Resource>>
  name:
    matches: ^(.*)_total$
    as: ""
  metricsQuery: sum(rate(<<.Series>>{<<.LabelMatchers>>}[5m])) by (<<.GroupBy>>)
- seriesQuery: '{namespace!="",__name__!~"^container_.*"}'
  seriesFilters: []
  resources:
    template: <<.Resource>>
  name:
    matches: ^(.*)_seconds_total$
    as: ""
  metricsQuery: sum(rate(<<.Series>>{<<.LabelMatchers>>}[5m])) by (<<.GroupBy>>)
{{- end -}}

{{/* The autoscaler's flags; extraArguments last. */}}
{{- define "surge.autoscaler.args" -}}
{{- with .Values.autoscaler -}}
- --source={{ .source }}
{{- /* HTTPS, callers authenticated and authorized by delegation (TokenReview, SubjectAccessReview); the
serving pair from servingCertSecret, else a self-signed one kept on the writable /tmp */}}
- --secure-port={{ .securePort }}
{{- if .servingCertSecret }}
- --tls-cert-file=/var/run/serving-cert/tls.crt
- --tls-private-key-file=/var/run/serving-cert/tls.key
{{- else }}
- --cert-dir=/tmp/cert
{{- end }}
- --log-level={{ .logLevel }}
- --prometheus-url={{ .prometheusUrl | default (include "surge.prometheusUrl" $) }}
{{- if .leaderElection.enabled }}
- --leader-elect
- --leader-elect-resource-name={{ include "surge.autoscaler.fullname" $ }}
- --leader-elect-resource-namespace={{ include "surge.namespace" $ }}
- --leader-elect-identity=$(POD_NAME)
- --leader-elect-buckets={{ .leaderElection.buckets }}
{{- end }}
{{- with .extraArguments }}
{{ toYaml . }}
{{- end }}
{{- end }}
{{- end -}}
