{{/*
The image every component runs: repository[:tag]. An empty tag leaves the
repository value as the whole reference (a digest, or the placeholder).
*/}}
{{- define "nodeqos.image" -}}
{{- if .Values.image.tag -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- else -}}
{{ .Values.image.repository }}
{{- end -}}
{{- end -}}

{{/*
The agent's ServiceAccount as the API server names its user; the admission
policies match on it.
*/}}
{{- define "nodeqos.agentUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:nodeqos-agent
{{- end -}}

{{/*
The descheduler's DeschedulerConfiguration (its ConfigMap, and the checksum
that rolls its pods when it changes). Profiles go through `tpl`, so values may
say "{{ .Release.Namespace }}".
*/}}
{{- define "nodeqos.deschedulerConfig" -}}
{{- $d := .Values.descheduler -}}
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: {{ $d.deschedulingInterval }}
dryRun: {{ $d.dryRun }}
{{- range $key := list "nodeSelector" "maxNoOfPodsToEvictPerNode" "maxNoOfPodsToEvictPerNamespace" "maxNoOfPodsToEvictTotal" "metricsProviders" }}
{{- if hasKey $d $key }}
{{ $key }}: {{ get $d $key | toJson }}
{{- end }}
{{- end }}
leaderElection:
  leaderElect: true
  resourceName: nodeqos-descheduler
  resourceNamespace: {{ .Release.Namespace }}
metricsBindAddress: 0.0.0.0:10258
healthzBindAddress: 0.0.0.0:10258
profiles:
{{- tpl (toYaml $d.profiles) . | nindent 2 }}
{{- end -}}

{{/*
The scheduler extender's LoadAwareSchedulingArgs.
*/}}
{{- define "nodeqos.extenderConfig" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: LoadAwareSchedulingArgs
{{- with .Values.schedulerExtender.args }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The manager's ConfigMap namespace, and its arguments (their checksum rolls its pods).
*/}}
{{- define "nodeqos.managerConfigNamespace" -}}
{{ .Values.manager.configNamespace | default .Release.Namespace }}
{{- end -}}

{{- define "nodeqos.managerArgs" -}}
- --config-namespace={{ include "nodeqos.managerConfigNamespace" . }}
- --lease-namespace={{ .Release.Namespace }}
- --metrics-addr=0.0.0.0:10259
- --webhook-addr=0.0.0.0:9443
- --webhook-service={{ .Release.Namespace }}/nodeqos-manager:443
{{- with .Values.manager.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end -}}
