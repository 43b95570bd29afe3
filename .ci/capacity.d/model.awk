# The capacity model: reads .ci/capacity.d/inputs ("name value" lines) and
# prints the sizing tables of docs/capacity.md as Markdown. Run it through
# .ci/capacity.
#
# A replica's capacity is its CPU at the autoscaler's target,
# pod_cpu_target cores (requests.cpu times averageUtilization), each doing
# 1e6 / cpu_us requests a second. Replicas are counted from cores,
# never the other way round: three replicas on one core serve what one
# does (.ci/capacity --check measures it). Redis runs its commands on one
# thread: its load is the sum of its CPU per call over the calls. Memory
# per pod is the process at rest, the catalog during a reload (the new
# catalog is built beside the old one), and the caches at their bounds.

!/^#/ && NF >= 2 { in_[$1] = $2 }

function need(k) {
	if (!(k in in_)) {
		print "capacity: " k " missing from the inputs" > "/dev/stderr"
		exit 1
	}
	return in_[k] + 0
}
function ceil(x) { return x == int(x) ? x : int(x) + 1 }
function max(a, b) { return a > b ? a : b }
function min(a, b) { return a < b ? a : b }
# group: 1234567 -> 1,234,567
function group(n,   s, out) {
	s = sprintf("%.0f", n)
	out = ""
	while (length(s) > 3) {
		out = "," substr(s, length(s) - 2) out
		s = substr(s, 1, length(s) - 3)
	}
	return s out
}
function cores(rps, us) { return rps * us / 1e6 }
function replicas(rps, us) { return max(need("min_replicas"), ceil(cores(rps, us) / need("pod_cpu_target"))) }
# mem_mb: resident memory per pod at its peak, in MiB, for a catalog of
# plants held in memory and a replay cache holding replay proofs.
function mem_mb(plants, replay) {
	return need("mem_base_mb") + need("token_cache_mb") + replay * need("replay_entry_bytes") / 1048576 + plants * need("plant_bytes") * need("reload_factor") / 1048576
}
# replay_fill: the proofs one replica's replay cache holds at dpop_rps
# DPoP requests a second over the replicas.
function replay_fill(dpop_rps, n) { return min(need("replay_entries"), dpop_rps / n * need("replay_window_s")) }
function fmt1(x) { return x < 10 ? sprintf("%.2f", x) : sprintf("%.1f", x) }

# limit: sets lim and then, the limits a path p at r requests/s over n
# replicas meets, the first (the one met at the lowest rate) and what to
# do, then the others: the replay cache's room per replica, replicas past
# the HPA's maximum, database connections past max_connections, Redis's
# one thread past redis_util.
function limit(p, r, n,   conns, l, t, k) {
	k = 0
	conns = q[p] ? n * need("pg_conns_request") : n * need("pg_conns_snapshot")
	if (replay_bound[p] && n > replicas(r, us[p])) {
		l[++k] = sprintf("replay cache per replica (%s DPoP requests/s)", group(need("replay_entries") / need("replay_window_s")))
		t[k] = sprintf("%d replicas (for room, not CPU), or a shorter -dpop-window or -jwt-leeway", n)
	}
	if (q[p] && conns > need("pg_max_connections")) {
		l[++k] = sprintf("database connections (%d > max_connections %d)", conns, need("pg_max_connections"))
		t[k] = "snapshot (the default), or a pooler (PgBouncer) and a smaller -db-max-conns"
	}
	if (n > need("max_replicas")) {
		l[++k] = sprintf("HPA maxReplicas %d", need("max_replicas"))
		t[k] = sprintf("maxReplicas %d, or pods of more CPU", n)
	}
	if (cores(r, rus[p]) > need("redis_util")) {
		l[++k] = sprintf("Redis's one thread (%s cores)", fmt1(cores(r, rus[p])))
		t[k] = "a Redis of its own core with io-threads, or no -redis-url (each replica's own guarantees)"
	}
	lim = k ? l[1] : "none"
	then = k ? t[1] : ""
	for (i_ = 2; i_ <= k; i_++)
		then = then "; then " l[i_] ": " t[i_]
}

END {
	split("1000 10000 100000", rates, " ")
	split("10000 100000 1000000 10000000", sizes, " ")
	# The paths: CPU per request, Redis calls and Redis CPU per request,
	# database queries per request, and whether the replay cache bounds
	# what a replica takes.
	np = split("bearer|bearer_limit|bearer_uncached|dpop_local|dpop|pg_request", paths, "|")
	for (j = 1; j <= np; j++) { rcalls[paths[j]] = 0; rus[paths[j]] = 0; q[paths[j]] = 0; replay_bound[paths[j]] = 0 }
	name["bearer"] = "bearer, cached token, no -rate-limit (with or without -redis-url)"
	us["bearer"] = need("cpu_bearer_cached")
	name["bearer_limit"] = "bearer, cached token, -rate-limit shared in Redis"
	us["bearer_limit"] = need("cpu_bearer_shared_limit"); rcalls["bearer_limit"] = 1; rus["bearer_limit"] = need("redis_us_rate")
	name["bearer_uncached"] = "bearer, every token new (RS256: one signature each)"
	us["bearer_uncached"] = need("cpu_bearer_rs256_uncached")
	name["dpop_local"] = "DPoP (ES256 proof), no -redis-url"
	us["dpop_local"] = need("cpu_dpop"); replay_bound["dpop_local"] = 1
	name["dpop"] = "DPoP (ES256 proof), replay and -rate-limit shared in Redis"
	us["dpop"] = need("cpu_dpop_shared"); rcalls["dpop"] = 1; rus["dpop"] = need("redis_us_dpop"); replay_bound["dpop"] = 1
	name["pg_request"] = "bearer, cached token, -database-snapshot=false"
	us["pg_request"] = need("cpu_pg_request"); q["pg_request"] = 1

	printf "Pods serving %s CPU each at the HPA's target (requests.cpu %dm, averageUtilization 100), at least %d; CPU µs of the machine the inputs were measured on.\n\n", need("pod_cpu_target"), need("pod_cpu_target") * 1000, need("min_replicas")
	print "| requests/s | path | CPU µs/request | cores | replicas | Redis calls/s | Redis cores | Redis memory | database queries/s | database cores | database connections | first limit | then |"
	print "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
	for (i = 1; i <= 3; i++) {
		r = rates[i]
		for (j = 1; j <= np; j++) {
			p = paths[j]
			n = replicas(r, us[p])
			if (replay_bound[p])
				n = max(n, ceil(r / (need("replay_entries") / need("replay_window_s"))))
			limit(p, r, n)
			conns = q[p] ? n * need("pg_conns_request") : n * need("pg_conns_snapshot")
			# Redis holds a key per proof for its life; the rate keys, one
			# per caller, last a burst's time and are left out.
			rmem = rcalls[p] && replay_bound[p] ? sprintf("%.0f MiB", r * need("replay_window_s") * need("redis_key_bytes") / 1048576) : "-"
			printf "| %s | %s | %.1f | %s | %d | %s | %s | %s | %s | %s | %d | %s | %s |\n", group(r), name[p], us[p], fmt1(cores(r, us[p])), n,
				group(r * rcalls[p]), fmt1(cores(r, rus[p])), rmem, group(r * q[p]), fmt1(cores(r * q[p], need("cpu_pg_query"))), conns, lim, then
		}
	}

	print ""
	printf "Memory per pod at its peak (a reload: the new catalog built beside the one serving; the token cache full at %d MiB), for bearer traffic from a snapshot (the default), and what one catalog change costs the database: every replica reads the whole catalog.\n\n", need("token_cache_mb")
	print "| requests/s | plants | replicas | memory per pod, peak | reload, each replica | rows read per catalog change | first limit | then |"
	print "| ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
	for (i = 1; i <= 3; i++) {
		r = rates[i]
		n = replicas(r, us["bearer"])
		np_ = replicas(r, us["pg_request"])
		for (k = 1; k <= 4; k++) {
			s = sizes[k]
			m = mem_mb(s, 0)
			lim = "none"; then = ""
			if (m > need("pod_mem_mb")) {
				lim = sprintf("memory per pod (%.0f MiB > %d MiB)", m, need("pod_mem_mb"))
				then = sprintf("requests.memory %.0f MiB and limits.memory %.0f MiB", ceil(m / 64) * 64, ceil(ceil(m / 64) * 64 / 0.9 / 64) * 64)
				if (np_ * need("pg_conns_request") <= need("pg_max_connections"))
					then = then sprintf(", or -database-snapshot=false (%d replicas, %s queries/s, %d connections)", np_, group(r), np_ * need("pg_conns_request"))
			}
			printf "| %s | %s | %d | %.0f MiB | %.1f s | %s | %s | %s |\n", group(r), group(s), n, m,
				s / 1e6 * need("reload_s_per_mplant"), group(n * s), lim, then
		}
	}
	printf "\nA DPoP replica also holds its replay cache: %.0f MiB when full (%s proofs).\n", need("replay_entries") * need("replay_entry_bytes") / 1048576, group(need("replay_entries"))
}
