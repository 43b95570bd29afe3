package check

import (
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ConnectionBudgetAnnotation, on the Deployment, states how many of
// PostgreSQL's max_connections the service's pools may take together.
const ConnectionBudgetAnnotation = "plantstore/postgres-connection-budget"

// DefaultConnectionBudget is the budget without the annotation: PostgreSQL's
// default max_connections (100) less its superuser_reserved_connections (3).
const DefaultConnectionBudget = 97

// migrateConnections is what one migration holds: a session for the
// advisory lock and one for the schema changes.
const migrateConnections = 2

// The hook annotations of the migration Job, and the order within them.
const (
	argoHook   = "argocd.argoproj.io/hook"
	argoWave   = "argocd.argoproj.io/sync-wave"
	helmHook   = "helm.sh/hook"
	helmWeight = "helm.sh/hook-weight"
)

// componentLabel tells the Deployment's pods from the migration's.
const componentLabel = "app.kubernetes.io/component"

// dsnSecret returns the Secret a container's PLANTSTORE_DATABASE_URL comes
// from, "" when it has none, and whether the DSN is a literal value.
func dsnSecret(c corev1.Container) (secret string, literal bool) {
	for _, e := range c.Env {
		if e.Name != "PLANTSTORE_DATABASE_URL" {
			continue
		}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.Name, false
		}
		return "", e.ValueFrom == nil
	}
	return "", false
}

func runsMigrate(c corev1.Container) bool {
	return len(c.Args) > 0 && c.Args[0] == "migrate" || len(c.Command) > 1 && c.Command[1] == "migrate"
}

// checkDatabase checks the PostgreSQL store's operation: the schema applied
// by a Job with the schema owner's credentials, never by the serving pods,
// and the pools within the connection budget.
func checkDatabase(m *manifests, d *appsv1.Deployment, main *corev1.Container, env map[string]string, hpa *autoscalingv2.HorizontalPodAutoscaler, v *violations) {
	for _, c := range d.Spec.Template.Spec.InitContainers {
		if runsMigrate(c) {
			v.add("Deployment %s: init container %s runs migrate on every pod start, with the serving credentials, and blocks starts while the database is down: use a Job (deploy/components/postgres)", d.Name, c.Name)
		}
	}
	if env["PLANTSTORE_DATABASE_URL"] != "" {
		v.add("PLANTSTORE_DATABASE_URL is a literal value: the DSN holds a password, take it from a Secret")
	}
	serving, literal := dsnSecret(*main)
	if serving == "" && !literal {
		for _, j := range m.jobs {
			v.add("Job %s: the service has no database", j.Name)
		}
		return
	}
	migrations := 0
	for _, j := range m.jobs {
		for _, c := range j.Spec.Template.Spec.Containers {
			if runsMigrate(c) {
				migrations++
				checkMigrationJob(j, c, serving, m, v)
			}
		}
	}
	if migrations == 0 {
		v.add("no Job runs plantstore migrate for the PostgreSQL store")
	}
	checkConnectionBudget(d, env, hpa, v)
}

// checkMigrationJob requires the migration Job to run as a pre-sync hook
// before the release's other objects exist (so it references none of
// them), with a Secret of its own.
func checkMigrationJob(j *batchv1.Job, c corev1.Container, serving string, m *manifests, v *violations) {
	if !strings.Contains(j.Annotations[argoHook], "PreSync") {
		v.add("Job %s: annotation %s must name PreSync, so Argo CD migrates before it rolls the pods", j.Name, argoHook)
	}
	if h := j.Annotations[helmHook]; !strings.Contains(h, "pre-install") || !strings.Contains(h, "pre-upgrade") {
		v.add("Job %s: annotation %s must name pre-install and pre-upgrade", j.Name, helmHook)
	}
	owner, _ := dsnSecret(c)
	switch {
	case owner == "":
		v.add("Job %s: PLANTSTORE_DATABASE_URL must come from a Secret", j.Name)
	case owner == serving:
		v.add("Job %s: migrates with the serving Secret %s: the schema owner's credentials belong in a Secret of their own", j.Name, owner)
	}
	spec := j.Spec.Template.Spec
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef != nil {
			v.add("Job %s: envFrom ConfigMap %s, which a pre-sync hook runs before", j.Name, from.ConfigMapRef.Name)
		}
	}
	if spec.ServiceAccountName != "" && spec.ServiceAccountName != "default" {
		v.add("Job %s: serviceAccountName %s, which a pre-sync hook runs before; the default one always exists", j.Name, spec.ServiceAccountName)
	}
	if j.Spec.ActiveDeadlineSeconds == nil {
		v.add("Job %s: no activeDeadlineSeconds: a migration waiting on its lock would hold the sync forever", j.Name)
	}
	if spec.RestartPolicy != corev1.RestartPolicyNever && spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		v.add("Job %s: restartPolicy %q", j.Name, spec.RestartPolicy)
	}
	checkPodSpec("Job "+j.Name, spec, m.services, v)
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	for _, jc := range spec.Containers {
		checkContainer(jc, psc, v)
	}
	checkSettings(configEnv(spec.Containers, m.configMaps, v), v)
	checkEgress("Job "+j.Name, m.netpols, labels.Set(j.Spec.Template.Labels),
		[]egressNeed{dnsNeed, {PostgresPort, corev1.ProtocolTCP, "PostgreSQL", true}}, v)
	checkMigrationPolicyOrder(j, m.netpols, v)
}

// checkMigrationPolicyOrder requires the NetworkPolicies that give the
// migration Job's pods their egress to exist before the Job runs, every
// way the Job is run: under a default-deny policy a first install's
// migration has no egress otherwise. An Argo CD PreSync hook in an earlier
// sync wave, a Helm hook of a lower weight, and the Job's component label
// (the documented kubectl apply selects the Job by it).
func checkMigrationPolicyOrder(j *batchv1.Job, nps []*networkingv1.NetworkPolicy, v *violations) {
	podLabels := labels.Set(j.Spec.Template.Labels)
	wave := func(a map[string]string) int {
		n, _ := strconv.Atoi(a[argoWave])
		return n
	}
	weight := func(a map[string]string) int {
		n, _ := strconv.Atoi(a[helmWeight])
		return n
	}
	for _, np := range selecting(nps, podLabels) {
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			continue
		}
		a := np.Annotations
		switch {
		case strings.Contains(j.Annotations[argoHook], "PreSync") && !strings.Contains(a[argoHook], "PreSync"):
			v.add("NetworkPolicy %s: Job %s is an Argo CD PreSync hook and the policy it needs is not: Argo CD syncs the policy after the hook, and a first install's migration has no egress under default-deny; make it a PreSync hook in an earlier sync wave", np.Name, j.Name)
		case strings.Contains(j.Annotations[argoHook], "PreSync") && wave(a) >= wave(j.Annotations):
			v.add("NetworkPolicy %s: sync wave %d, not before Job %s's %d", np.Name, wave(a), j.Name, wave(j.Annotations))
		}
		switch {
		case j.Annotations[helmHook] != "" && a[helmHook] != j.Annotations[helmHook]:
			v.add("NetworkPolicy %s: Helm hook %q, want the Job's %q", np.Name, a[helmHook], j.Annotations[helmHook])
		case j.Annotations[helmHook] != "" && weight(a) >= weight(j.Annotations):
			v.add("NetworkPolicy %s: Helm hook weight %d, not below Job %s's %d", np.Name, weight(a), j.Name, weight(j.Annotations))
		}
		if c := j.Labels[componentLabel]; c != "" && np.Labels[componentLabel] != c {
			v.add("NetworkPolicy %s: label %s=%q, want the Job's %q: kubectl apply --selector %s=%s applies the Job without it", np.Name, componentLabel, np.Labels[componentLabel], c, componentLabel, c)
		}
	}
}

// checkConnectionBudget requires the most connections the pools can open
// at once to fit the budget: the most pods (the HPA's maxReplicas plus the
// rollout's surge) times PLANTSTORE_DB_MAX_CONNS and, in snapshot mode (the
// default), the connection each pod listens on outside its pool, plus a
// migration.
func checkConnectionBudget(d *appsv1.Deployment, env map[string]string, hpa *autoscalingv2.HorizontalPodAutoscaler, v *violations) {
	s, ok := env["PLANTSTORE_DB_MAX_CONNS"]
	if !ok {
		v.add("PLANTSTORE_DB_MAX_CONNS is not set: size the pool against the PostgreSQL connection budget")
		return
	}
	conns, err := strconv.Atoi(s)
	if err != nil || conns < 1 {
		v.add("PLANTSTORE_DB_MAX_CONNS=%q is not a positive number", s)
		return
	}
	budget, source := DefaultConnectionBudget, "PostgreSQL's default max_connections 100 less 3 reserved"
	if a, ok := d.Annotations[ConnectionBudgetAnnotation]; ok {
		n, err := strconv.Atoi(a)
		if err != nil || n < 1 {
			v.add("Deployment %s: annotation %s=%q is not a positive number", d.Name, ConnectionBudgetAnnotation, a)
			return
		}
		budget, source = n, ConnectionBudgetAnnotation
	}
	pods := 1
	switch {
	case hpa != nil:
		pods = int(hpa.Spec.MaxReplicas)
	case d.Spec.Replicas != nil:
		pods = int(*d.Spec.Replicas)
	}
	surge := intstr.FromString("25%")
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxSurge != nil {
		surge = *ru.MaxSurge
	}
	extra, err := intstr.GetScaledValueFromIntOrPercent(&surge, pods, true)
	if err != nil {
		v.add("Deployment %s: maxSurge %s: %v", d.Name, surge.String(), err)
		return
	}
	perPod, listen := conns, ""
	if !strings.EqualFold(env["PLANTSTORE_DATABASE_SNAPSHOT"], "false") {
		perPod, listen = conns+1, " + 1 listening"
	}
	if total := (pods+extra)*perPod + migrateConnections; total > budget {
		v.add("(%d pods + %d surging) x (PLANTSTORE_DB_MAX_CONNS %d%s) + %d for a migration = %d PostgreSQL connections, over the budget of %d (%s)",
			pods, extra, conns, listen, migrateConnections, total, budget, source)
	}
}
