{{/*
The names and labels of every object. Names start with the release's name
("plantstore" gives the names deploy/base uses); labels are those of
deploy/base (app.kubernetes.io/name and part-of, the env label of the
overlays) plus Helm's own. Selectors use app.kubernetes.io/name and
app.kubernetes.io/component only, as deploy/base does: one release per
namespace.
*/}}
{{- define "plantstore.fullname" -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "plantstore.labels" -}}
app.kubernetes.io/name: plantstore
app.kubernetes.io/part-of: plantstore
{{- with .Values.env }}
env: {{ . | quote }}
{{- end }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}

{{- define "plantstore.selector" -}}
app.kubernetes.io/name: plantstore
app.kubernetes.io/component: api
{{- end -}}

{{- define "plantstore.podLabels" -}}
{{ include "plantstore.selector" . }}
{{- with .Values.env }}
env: {{ . | quote }}
{{- end }}
{{- end -}}

{{/* The image, always by digest: repository:tag@digest. */}}
{{- define "plantstore.image" -}}
{{- $i := .Values.image -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" $i.digest) -}}
{{- fail "image.digest must be set to the image's sha256:<64 hex> digest: the chart deploys images by digest only" -}}
{{- end -}}
{{- if $i.tag -}}
{{ $i.repository }}:{{ $i.tag }}@{{ $i.digest }}
{{- else -}}
{{ $i.repository }}@{{ $i.digest }}
{{- end -}}
{{- end -}}

{{/* The security context of every container (deploy/base). */}}
{{- define "plantstore.containerSecurityContext" -}}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "plantstore.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The DNS egress rule of every pod (deploy/base): the cluster's DNS
pods, and NodeLocal DNSCache's pods and address where it runs. */}}
{{- define "plantstore.dnsEgress" -}}
{{- $dns := .Values.networkPolicy.dns -}}
- to:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ $dns.namespace }}
      podSelector:
        matchLabels:
          {{- toYaml $dns.podLabels | nindent 10 }}
    {{- if $dns.nodeLocal.enabled }}
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ $dns.namespace }}
      podSelector:
        matchLabels:
          {{- toYaml $dns.nodeLocal.podLabels | nindent 10 }}
    - ipBlock:
        cidr: {{ $dns.nodeLocal.cidr }}
    {{- end }}
  ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
{{- end -}}

{{/* An egress rule to every address on one TCP port. */}}
{{- define "plantstore.anyEgress" -}}
- to:
    - ipBlock:
        cidr: 0.0.0.0/0
    - ipBlock:
        cidr: ::/0
  ports:
    - port: {{ . }}
      protocol: TCP
{{- end -}}

{{/* An egress rule to peers on one TCP port: (list peers port). */}}
{{- define "plantstore.peerEgress" -}}
- to:
    {{- toYaml (index . 0) | nindent 4 }}
  ports:
    - port: {{ index . 1 }}
      protocol: TCP
{{- end -}}

{{/* The files the pods read, and where. */}}
{{- define "plantstore.issuersPath" -}}/etc/plantstore/issuers/issuers.yaml{{- end -}}
{{- define "plantstore.noncePath" -}}/etc/plantstore/dpop-nonce/{{ .Values.dpopNonceKey.key }}{{- end -}}
