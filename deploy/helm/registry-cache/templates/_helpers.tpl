{{/* The chart's name, or nameOverride. */}}
{{- define "registry-cache.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The resources' base name: fullnameOverride, else the release name (containing the chart name or not). */}}
{{- define "registry-cache.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Whether this is the HA mode (replicas sharing a bucket). */}}
{{- define "registry-cache.ha" -}}
{{- if gt (int .Values.replicas) 1 -}}true{{- end -}}
{{- end -}}

{{/* Pod selector labels: never change them in a new chart version (a Deployment's selector is immutable). */}}
{{- define "registry-cache.selectorLabels" -}}
app.kubernetes.io/name: {{ include "registry-cache.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Pod selector labels of the node mirror DaemonSet: a name of its own, so that the Services, the
PodDisruptionBudget and the NetworkPolicy of the cache never select its pods. Never change them. */}}
{{- define "registry-cache.nodeMirrorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "registry-cache.name" . }}-node-mirror
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every resource. */}}
{{- define "registry-cache.labels" -}}
{{ include "registry-cache.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: registry-cache
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The peer token Secret's name. */}}
{{- define "registry-cache.peerSecret" -}}
{{- default (printf "%s-peer" (include "registry-cache.fullname" .)) .Values.cluster.existingTokenSecret -}}
{{- end -}}

{{/* The default upstream: defaultUpstream, else the only upstream's key. */}}
{{- define "registry-cache.defaultUpstream" -}}
{{- if .Values.defaultUpstream -}}
{{- .Values.defaultUpstream -}}
{{- else if eq (len .Values.upstreams) 1 -}}
{{- keys .Values.upstreams | first -}}
{{- end -}}
{{- end -}}
