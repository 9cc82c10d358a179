{{- define "sample.labels" -}}
app.kubernetes.io/name: sample
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
