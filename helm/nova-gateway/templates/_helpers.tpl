{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "nova-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: release name + chart name unless the release name already contains it. */}}
{{- define "nova-gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "nova-gateway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "nova-gateway.labels" -}}
helm.sh/chart: {{ include "nova-gateway.chart" . }}
{{ include "nova-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nova-gateway
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels: never change them between releases (Deployment selectors are immutable). */}}
{{- define "nova-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nova-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "nova-gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "nova-gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "nova-gateway.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* Secret whose keys become env vars: the chart-managed one or .Values.existingSecret. */}}
{{- define "nova-gateway.secretName" -}}
{{- default (include "nova-gateway.fullname" .) .Values.existingSecret }}
{{- end }}

{{/* "true" when the values give the gateway a Redis URL (redis.url or redis.existingSecret). A REDIS_URL inside existingSecret is invisible to the chart. */}}
{{- define "nova-gateway.redisConfigured" -}}
{{- if or .Values.redis.url .Values.redis.existingSecret }}true{{ end }}
{{- end }}

{{/* terminationGracePeriodSeconds: explicit (checked) or preStop + drain + 15 s. */}}
{{- define "nova-gateway.terminationGracePeriodSeconds" -}}
{{- $s := .Values.shutdown }}
{{- $min := add $s.preStopSleepSeconds $s.drainTimeoutSeconds }}
{{- if kindIs "invalid" $s.terminationGracePeriodSeconds }}
{{- add $min 15 }}
{{- else if le (int $s.terminationGracePeriodSeconds) (int $min) }}
{{- fail (printf "shutdown.terminationGracePeriodSeconds (%v) must be greater than shutdown.preStopSleepSeconds + shutdown.drainTimeoutSeconds (%v), or the kubelet kills streams still draining" $s.terminationGracePeriodSeconds $min) }}
{{- else }}
{{- $s.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/*
Checks of value combinations that values.schema.json cannot express. Included by the
Deployment so that `helm template`, `lint` and `install` all fail early with a clear message.
*/}}
{{- define "nova-gateway.validate" -}}
{{- $v := .Values }}
{{- if $v.existingSecret }}
{{- if $v.adminToken }}
{{- fail "adminToken cannot be combined with existingSecret: put NOVA_ADMIN_TOKEN in the existing Secret" }}
{{- end }}
{{- if $v.consoleSecret }}
{{- fail "consoleSecret cannot be combined with existingSecret: put NOVA_CONSOLE_SECRET in the existing Secret" }}
{{- end }}
{{- if $v.upstreamApiKeys }}
{{- fail "upstreamApiKeys cannot be combined with existingSecret: put the upstream keys in the existing Secret" }}
{{- end }}
{{- if $v.redis.url }}
{{- fail "redis.url cannot be combined with existingSecret: put REDIS_URL in the existing Secret, or use redis.existingSecret" }}
{{- end }}
{{- end }}
{{- if and (not (include "nova-gateway.redisConfigured" .)) (not $v.existingSecret) }}
{{- if gt (int $v.replicaCount) 1 }}
{{- fail "replicaCount > 1 needs Redis (redis.url or redis.existingSecret): without it every pod has its own in-memory store" }}
{{- end }}
{{- if $v.autoscaling.enabled }}
{{- fail "autoscaling.enabled needs Redis (redis.url or redis.existingSecret): without it every pod has its own in-memory store" }}
{{- end }}
{{- end }}
{{- if and (eq $v.redis.mode "sentinel") (not $v.redis.sentinelMaster) }}
{{- fail "redis.mode sentinel needs redis.sentinelMaster (REDIS_SENTINEL_MASTER, the master group the sentinels watch)" }}
{{- end }}
{{- if and $v.autoscaling.enabled (gt (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas)) }}
{{- fail "autoscaling.minReplicas must not exceed autoscaling.maxReplicas" }}
{{- end }}
{{- if not $v.existingSecret }}
{{- $provided := dict }}
{{- range $name, $_ := $v.upstreamApiKeys }}{{ $_ := set $provided $name true }}{{ end }}
{{- range $v.extraEnv }}{{ $_ := set $provided .name true }}{{ end }}
{{- range $model := $v.config.models }}
{{- range $target := prepend ($model.fallbacks | default list) $model }}
{{- if and $target.api_key_env (not (hasKey $provided $target.api_key_env)) }}
{{- fail (printf "config.models[id=%s] names api_key_env %s but neither upstreamApiKeys nor extraEnv provides it" $model.id $target.api_key_env) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Labels of the `helm test` pod. They deliberately do not match the gateway's selector labels, so
the ReplicaSet never adopts the pod and the Service, PDB and NetworkPolicy never select it.
*/}}
{{- define "nova-gateway.testLabels" -}}
helm.sh/chart: {{ include "nova-gateway.chart" . }}
app.kubernetes.io/name: {{ printf "%s-test" (include "nova-gateway.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: test
{{- end }}

{{/*
PromQL label matchers picking this release's gateway series: prometheusRule.selector, else the
job the ServiceMonitor gives them (the Service name) and the release namespace.
*/}}
{{- define "nova-gateway.metricSelector" -}}
{{- .Values.prometheusRule.selector | default (printf "job=\"%s\", namespace=\"%s\"" (include "nova-gateway.fullname" .) .Release.Namespace) -}}
{{- end }}
