{{/*
Where the daemon's signed endpoints keep their replay records (docs/daemon.md, "Replays, restarts
and clocks"). "file": the state directory of one pod. "kubernetes": one ConfigMap per source that
every replica claims in (replay-store.yaml renders them and a Role limited to them). "auto", the
default, is kubernetes with more than one replica: a request one replica accepted must be a
replay to every other.
*/}}
{{- define "keyroll.replayStoreKind" -}}
{{- $d := .Values.daemon }}
{{- $store := $d.replayStore | default "auto" }}
{{- if not $d.enabled }}
{{- "none" }}
{{- else if eq $store "auto" }}
{{- ternary "kubernetes" "file" (gt (int ($d.replicas | default 1)) 1) }}
{{- else }}
{{- $store }}
{{- end }}
{{- end }}

{{/* The ConfigMaps' common prefix: <prefix>-trigger, <prefix>-github, <prefix>-gitguardian. */}}
{{- define "keyroll.replayStorePrefix" -}}
{{- include "keyroll.fullname" . }}-replay
{{- end }}

{{/* The daemon's flags for the store, as a JSON list (empty for the file store). */}}
{{- define "keyroll.replayStoreArgs" -}}
{{- if eq (include "keyroll.replayStoreKind" .) "kubernetes" }}
{{- list "--replay-store" (printf "kubernetes:%s/%s" .Release.Namespace (include "keyroll.replayStorePrefix" .)) | toJson }}
{{- else }}
{{- list | toJson }}
{{- end }}
{{- end }}
