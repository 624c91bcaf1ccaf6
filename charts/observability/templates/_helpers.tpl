{{- define "obs.image" -}}
{{ .root.Values.images.prefix }}{{ .image.name }}:{{ .image.tag }}
{{- end }}

{{- define "obs.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: observability
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{- define "obs.selector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{/* A relabel rule that drops targets in the excluded namespaces. */}}
{{- define "obs.dropExcluded" -}}
{{- if .Values.excludedNamespaces }}
- source_labels: [__meta_kubernetes_namespace]
  regex: {{ join "|" .Values.excludedNamespaces | quote }}
  action: drop
{{- end }}
{{- end }}
