{{- define "nightly.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "nightly.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "nightly.serviceAccount" -}}
{{- default (include "nightly.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "nightly.claim" -}}
{{- default (printf "%s-results" (include "nightly.fullname" .)) .Values.results.existingClaim -}}
{{- end -}}
