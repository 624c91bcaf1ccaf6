{{/* Labels of one component. */}}
{{- define "hotel.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: hotel-reservation
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{- define "hotel.selector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{/* Pod annotations: Prometheus scrapes every service on its own port. */}}
{{- define "hotel.scrape" -}}
prometheus.io/scrape: "true"
prometheus.io/port: "8080"
prometheus.io/path: /metrics
checksum/settings: {{ include (print .Template.BasePath "/settings.yaml") . | sha256sum | trunc 16 }}
{{- end }}

{{- define "hotel.image" -}}
{{ .image }}
{{- end }}

{{/* HTTP probes of a Python service: /healthz says the process runs, /readyz that its dependencies answer. */}}
{{- define "hotel.probes" -}}
livenessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: http}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
{{- end }}

{{/* The load generator: one per app namespace, in the loadgen namespace (observability). */}}
{{- define "hotel.loadgenName" -}}
loadgen-{{ .Release.Namespace }}
{{- end }}

{{- define "hotel.loadgenSelector" -}}
app.kubernetes.io/name: loadgen
app.kubernetes.io/instance: {{ .Release.Name }}
target-namespace: {{ .Release.Namespace }}
{{- end }}

{{- define "hotel.loadgenLabels" -}}
{{ include "hotel.loadgenSelector" . }}
app.kubernetes.io/part-of: {{ .Chart.Name }}
{{- end }}
