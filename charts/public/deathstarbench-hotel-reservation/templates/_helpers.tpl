{{/* A Deployment and its ClusterIP Service; args: root, name, image, port, command (list), args (list), extra (container yaml), volumes (yaml). */}}
{{- define "dsb.component" -}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  labels: {app.kubernetes.io/name: {{ .name }}, app.kubernetes.io/part-of: {{ .root.Chart.Name }}}
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/name: {{ .name }}}
  template:
    metadata:
      labels: {app.kubernetes.io/name: {{ .name }}, app.kubernetes.io/part-of: {{ .root.Chart.Name }}}
    spec:
      containers:
        - name: {{ .name }}
          image: {{ .image }}
          imagePullPolicy: {{ .root.Values.image.pullPolicy }}
          {{- with .command }}
          command: {{ toJson . }}
          {{- end }}
          {{- with .args }}
          args: {{ toJson . }}
          {{- end }}
          ports: [{containerPort: {{ .port }}}]
          readinessProbe: {tcpSocket: {port: {{ .port }}}, periodSeconds: 5}
          livenessProbe: {tcpSocket: {port: {{ .port }}}, periodSeconds: 15, initialDelaySeconds: 15}
          resources: {{- toYaml .root.Values.resources | nindent 12 }}
          {{- with .extra }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
      {{- with .volumes }}
      volumes: {{- toYaml . | nindent 8 }}
      {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ .name }}
  labels: {app.kubernetes.io/name: {{ .name }}, app.kubernetes.io/part-of: {{ .root.Chart.Name }}}
spec:
  selector: {app.kubernetes.io/name: {{ .name }}}
  ports: [{name: main, port: {{ .port }}, targetPort: {{ .port }}}]
{{- end }}
