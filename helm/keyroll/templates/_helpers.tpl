{{/*
Names. The full name is <release>-keyroll (or the release name when it already contains
"keyroll"), truncated to 52 characters because a CronJob's Jobs add an 11-character suffix.
*/}}
{{- define "keyroll.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 52 | trimSuffix "-" }}
{{- end }}

{{- define "keyroll.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "keyroll.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "keyroll.selectorLabels" -}}
app.kubernetes.io/name: {{ include "keyroll.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "keyroll.labels" -}}
helm.sh/chart: {{ include "keyroll.chart" . }}
{{ include "keyroll.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "keyroll.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "keyroll.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "keyroll.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "keyroll.policyConfigMapName" -}}
{{- if .Values.existingPolicyConfigMap.name }}
{{- .Values.existingPolicyConfigMap.name }}
{{- else }}
{{- printf "%s-policy" (include "keyroll.fullname" .) }}
{{- end }}
{{- end }}

{{- define "keyroll.policyKey" -}}
{{- if .Values.existingPolicyConfigMap.name }}{{ .Values.existingPolicyConfigMap.key }}{{ else }}policy.yaml{{ end }}
{{- end }}

{{/* Where the policy is mounted; the Dockerfile's default CMD reads the same path. */}}
{{- define "keyroll.policyPath" -}}/etc/keyroll/policy.yaml{{- end }}

{{/*
Checks that hold across values and that the values schema cannot express. Included by every
workload template, so a bad combination fails `helm install` and `helm template` plainly.
*/}}
{{- define "keyroll.validate" -}}
{{- $inline := not (empty .Values.policy) }}
{{- $existing := not (empty .Values.existingPolicyConfigMap.name) }}
{{- if and $inline $existing }}
{{- fail "set either policy or existingPolicyConfigMap.name, not both" }}
{{- end }}
{{- if not (or $inline $existing) }}
{{- fail "no rotation policy: set policy (YAML, docs/policy.md) or existingPolicyConfigMap.name" }}
{{- end }}
{{- if and .Values.daemon.enabled .Values.cronjob.enabled }}
{{- fail "daemon.enabled and cronjob.enabled are both true: the daemon schedules rotations itself; set cronjob.enabled=false" }}
{{- end }}
{{- if and .Values.sharding.enabled .Values.daemon.enabled }}
{{- fail "sharding applies to the scheduled CronJob; the daemon is a single replica. Disable one of sharding.enabled and daemon.enabled" }}
{{- end }}
{{- if and .Values.storage.enabled (eq .Values.storage.type "existingClaim") (not .Values.storage.existingClaim) }}
{{- fail "storage.type is existingClaim but storage.existingClaim is empty" }}
{{- end }}
{{- include "keyroll.validateConsumerAccess" . }}
{{- end }}

{{/*
A policy given inline whose keys list a Kubernetes consumer that consumerAccess does not name
would earn keyroll a 403 at its first leak: refused here instead. (A policy in an existing
ConfigMap is not visible to the chart; its consumers are yours to list.)
*/}}
{{- define "keyroll.validateConsumerAccess" -}}
{{- $policy := .Values.policy }}
{{- if kindIs "string" $policy }}{{- $policy = fromYaml $policy }}{{- end }}
{{- $fields := dict "externalSecret" "externalSecrets" "deployment" "deployments" "statefulSet" "statefulSets" "daemonSet" "daemonSets" }}
{{- if kindIs "map" $policy }}
{{- range $key := ($policy.keys | default list) }}
{{- range $consumer := ($key.consumers | default list) }}
{{- $field := get $fields ($consumer.kind | default "") }}
{{- if $field }}
{{- $granted := false }}
{{- range $access := $.Values.consumerAccess }}
{{- if and (eq $access.namespace $consumer.namespace) (has $consumer.name (get $access $field | default list)) }}{{- $granted = true }}{{- end }}
{{- end }}
{{- if not $granted }}
{{- fail (printf "the policy's key %s lists %s %s/%s, but consumerAccess does not name it: add it under consumerAccess (namespace %s, %s) so keyroll may get, patch and watch it" $key.id $consumer.kind $consumer.namespace $consumer.name $consumer.namespace $field) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of one component (cronjob, rotate, daemon, test) on top of the common ones. */}}
{{- define "keyroll.componentLabels" -}}
{{ include "keyroll.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
The pod spec every keyroll workload shares. Call with
  dict "root" $ "component" "cronjob" "args" (list …) "restartPolicy" "Never" "env" (list …)
*/}}
{{- define "keyroll.podTemplate" -}}
{{- $root := .root }}
{{- $values := $root.Values }}
metadata:
  labels:
    {{- include "keyroll.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
    {{- with $values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "keyroll.serviceAccountName" $root }}
  # The token is needed for Vault's kubernetes auth, to refresh the consumers of consumerAccess,
  # for the daemon's Lease (leader election) and for its shared replay records (replay-store.yaml).
  automountServiceAccountToken: {{ or $values.serviceAccount.automountToken (not (empty $values.consumerAccess)) (.automountToken | default false) (eq (include "keyroll.replayStoreKind" $root) "kubernetes") }}
  # Service environment variables are noise in keyroll's environment; it reads its
  # endpoints from the policy.
  enableServiceLinks: false
  restartPolicy: {{ .restartPolicy }}
  terminationGracePeriodSeconds: {{ $values.terminationGracePeriodSeconds }}
  {{- with $values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with $values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $values.podSecurityContext | nindent 4 }}
  containers:
    - name: keyroll
      image: {{ include "keyroll.image" $root | quote }}
      imagePullPolicy: {{ $values.image.pullPolicy }}
      args:
        {{- toYaml .args | nindent 8 }}
      env:
        - name: KEYROLL_POLICY
          value: {{ include "keyroll.policyPath" $root | quote }}
        - name: HOME
          value: /tmp
        - name: TMPDIR
          value: /tmp
        {{- with .env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $values.tracing }}
        {{- if .endpoint }}
        # Traces (docs/tracing.md): the standard OpenTelemetry variables.
        - name: OTEL_EXPORTER_OTLP_ENDPOINT
          value: {{ .endpoint | quote }}
        - name: OTEL_EXPORTER_OTLP_PROTOCOL
          value: {{ .protocol | quote }}
        - name: OTEL_SERVICE_NAME
          value: {{ .serviceName | default "keyroll" | quote }}
        - name: OTEL_TRACES_SAMPLER
          value: {{ .sampler | quote }}
        {{- with .samplerArg }}
        - name: OTEL_TRACES_SAMPLER_ARG
          value: {{ . | quote }}
        {{- end }}
        {{- if .headersSecret.name }}
        - name: OTEL_EXPORTER_OTLP_HEADERS
          valueFrom:
            secretKeyRef:
              name: {{ .headersSecret.name | quote }}
              key: {{ .headersSecret.key | quote }}
        {{- end }}
        {{- end }}
        {{- end }}
        {{- with $values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .ports }}
      ports:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .probes }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
      securityContext:
        {{- toYaml $values.containerSecurityContext | nindent 8 }}
      resources:
        {{- toYaml $values.resources | nindent 8 }}
      volumeMounts:
        - name: policy
          mountPath: /etc/keyroll
          readOnly: true
        - name: tmp
          mountPath: /tmp
        {{- range $name, $credential := $values.credentials }}
        {{- if $credential.existingSecret }}
        - name: credentials-{{ $name }}
          mountPath: /var/run/secrets/keyroll/{{ $name }}
          readOnly: true
        {{- end }}
        {{- end }}
        {{- if $values.storage.enabled }}
        - name: data
          mountPath: {{ $values.storage.mountPath }}
        {{- end }}
        {{- range $values.extraMounts }}
        - name: extra-{{ .name }}
          mountPath: {{ .mountPath }}
          readOnly: true
        {{- end }}
  volumes:
    - name: policy
      configMap:
        name: {{ include "keyroll.policyConfigMapName" $root }}
        items:
          - key: {{ include "keyroll.policyKey" $root }}
            path: policy.yaml
    - name: tmp
      emptyDir:
        sizeLimit: {{ $values.tmpSizeLimit }}
    {{- range $name, $credential := $values.credentials }}
    {{- if $credential.existingSecret }}
    - name: credentials-{{ $name }}
      secret:
        secretName: {{ $credential.existingSecret }}
        # 0440: readable by keyroll's group (fsGroup), by nobody else.
        defaultMode: 288
        optional: {{ $credential.optional | default false }}
    {{- end }}
    {{- end }}
    {{- if $values.storage.enabled }}
    - name: data
      {{- if eq $values.storage.type "emptyDir" }}
      emptyDir: {}
      {{- else }}
      persistentVolumeClaim:
        claimName: {{ if eq $values.storage.type "existingClaim" }}{{ $values.storage.existingClaim }}{{ else }}{{ include "keyroll.fullname" $root }}-data{{ end }}
      {{- end }}
    {{- end }}
    {{- range $values.extraMounts }}
    - name: extra-{{ .name }}
      {{- if .secretName }}
      secret:
        secretName: {{ .secretName }}
        defaultMode: 288
      {{- else }}
      configMap:
        name: {{ .configMapName }}
      {{- end }}
    {{- end }}
  {{- with $values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/*
Job settings shared by scheduled, sharded and one-off Jobs. Call with
  dict "root" $ "indexed" true|false
*/}}
{{- define "keyroll.jobSpec" -}}
{{- $job := .root.Values.job }}
{{- if .indexed }}
completionMode: Indexed
completions: {{ .root.Values.sharding.shards }}
parallelism: {{ .root.Values.sharding.parallelism | default .root.Values.sharding.shards }}
backoffLimitPerIndex: {{ $job.backoffLimit }}
{{- else }}
backoffLimit: {{ $job.backoffLimit }}
{{- end }}
activeDeadlineSeconds: {{ $job.activeDeadlineSeconds }}
ttlSecondsAfterFinished: {{ $job.ttlSecondsAfterFinished }}
{{- if $job.podFailurePolicy }}
podFailurePolicy:
  rules:
    # Evictions (node drain, preemption) do not count: keyroll stopped cleanly on SIGTERM.
    - action: Ignore
      onPodConditions:
        - type: DisruptionTarget
          status: "True"
    # keyroll's own exit codes: it already retried, alerted and recorded what to do next.
    - action: {{ if .indexed }}FailIndex{{ else }}FailJob{{ end }}
      onExitCodes:
        containerName: keyroll
        operator: In
        values: [1, 2, 3]
{{- end }}
{{- end }}

{{/* The Lease the daemon's replicas elect their leader on (leader-rbac.yaml renders it). */}}
{{- define "keyroll.leaseName" -}}
{{- .Values.daemon.leaderElection.leaseName | default (printf "%s-leader" (include "keyroll.fullname" .)) | trunc 63 | trimSuffix "-" -}}
{{- end }}
