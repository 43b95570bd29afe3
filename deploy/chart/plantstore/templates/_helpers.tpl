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

{{/* The DNS egress rule of every pod (deploy/base). */}}
{{- define "plantstore.dnsEgress" -}}
- to:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ .Values.networkPolicy.dns.namespace }}
      podSelector:
        matchLabels:
          {{- toYaml .Values.networkPolicy.dns.podLabels | nindent 10 }}
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

{{/* The files the pods read, and where. */}}
{{- define "plantstore.issuersPath" -}}/etc/plantstore/issuers/issuers.yaml{{- end -}}
{{- define "plantstore.noncePath" -}}/etc/plantstore/dpop-nonce/{{ .Values.dpopNonceKey.key }}{{- end -}}
