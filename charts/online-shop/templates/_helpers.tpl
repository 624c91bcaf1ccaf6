{{/* Labels of one component. */}}
{{- define "shop.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: online-shop
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{- define "shop.selector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{/* Pod annotations: Prometheus scrapes every service on its own port. */}}
{{- define "shop.scrape" -}}
prometheus.io/scrape: "true"
prometheus.io/port: "8080"
prometheus.io/path: /metrics
checksum/settings: {{ include (print .Template.BasePath "/settings.yaml") . | sha256sum | trunc 16 }}
{{- end }}

{{- define "shop.image" -}}
{{ .image }}
{{- end }}

{{/* HTTP probes of a Python service: /healthz says the process runs, /readyz that its dependencies answer. */}}
{{- define "shop.probes" -}}
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

{{/* The claim template of a store's data volume; args: root, storage. */}}
{{- define "shop.dataClaim" -}}
- metadata:
    name: data
{{ include "shop.claimSpec" . | indent 2 }}
{{- end }}

{{/* The spec of a ReadWriteOnce claim on the release's storage; args: root, storage. */}}
{{- define "shop.claimSpec" -}}
spec:
  accessModes: [ReadWriteOnce]
  {{- if .root.Values.persistence.hostPath.root }}
  storageClassName: {{ printf "%s-local" .root.Release.Namespace }}
  {{- else if .root.Values.persistence.storageClassName }}
  storageClassName: {{ .root.Values.persistence.storageClassName }}
  {{- end }}
  resources: {requests: {storage: {{ .storage }}}}
{{- end }}

{{/* Without a provisioner: a hostPath volume on the node bound to one store's claim; args: root, name,
storage and claim (default: the claim of the StatefulSet's first pod, data-<name>-0). */}}
{{- define "shop.hostPathVolume" -}}
{{- if .root.Values.persistence.hostPath.root }}
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: {{ .root.Release.Namespace }}-{{ .name }}-data
  labels: {{- include "shop.labels" (dict "name" .name "root" .root) | nindent 4 }}
spec:
  capacity: {storage: {{ .storage }}}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: {{ printf "%s-local" .root.Release.Namespace }}
  claimRef: {namespace: {{ .root.Release.Namespace }}, name: {{ .claim | default (printf "data-%s-0" .name) }}}
  hostPath:
    path: {{ printf "%s/%s/%s" .root.Values.persistence.hostPath.root .root.Release.Namespace .name }}
    type: DirectoryOrCreate
{{- end }}
{{- end }}

{{/* A hostPath directory is created root-owned; the store runs as nobody: hand it the directory first;
args: image, root, volume (default data). */}}
{{- define "shop.ownData" -}}
initContainers:
  - name: own-data
    image: {{ include "shop.image" (dict "image" .image "root" .root) }}
    imagePullPolicy: {{ .root.Values.images.pullPolicy }}
    command: [chown, "65534:65534", /data]
    securityContext: {runAsUser: 0}
    volumeMounts: [{name: {{ .volume | default "data" }}, mountPath: /data}]
{{- end }}

{{/* The load generator: one per app namespace, in the loadgen namespace (observability). */}}
{{- define "shop.loadgenName" -}}
loadgen-{{ .Release.Namespace }}
{{- end }}

{{- define "shop.loadgenSelector" -}}
app.kubernetes.io/name: loadgen
app.kubernetes.io/instance: {{ .Release.Name }}
target-namespace: {{ .Release.Namespace }}
{{- end }}

{{- define "shop.loadgenLabels" -}}
{{ include "shop.loadgenSelector" . }}
app.kubernetes.io/part-of: {{ .Chart.Name }}
{{- end }}
