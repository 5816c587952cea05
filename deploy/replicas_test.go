package deploy

import (
	"net/url"
	"slices"
	"testing"

	composetypes "github.com/compose-spec/compose-go/v2/types"

	"github.com/llmgw/gateway/internal/config"
)

// composeReplicas checks the gateway replicas of the compose stack: each
// loads its settings, they share one routes file, Postgres and the redis
// service, and each has its own replica id, spool and host port (two
// processes writing one spool would corrupt it). mount is TestComposeConfig's.
func composeReplicas(t *testing.T, cf *composetypes.Project, mount func(svc, hostRel string) string) {
	t.Helper()
	redis, ok := cf.Services["redis"]
	if !ok {
		return // reported by the caller
	}
	if redis.HealthCheck == nil {
		t.Error("compose: redis has no healthcheck")
	}
	// The shared limits need nothing kept: a Redis that restarts empty is
	// what the replicas are built for, and a snapshot would be stale.
	if !slices.Contains(redis.Command, "--appendonly") || !slices.Contains(redis.Command, "--save") {
		t.Errorf("compose: redis command %v, want persistence off (--save '' --appendonly no)", redis.Command)
	}
	ids, spools, ports := map[string]string{}, map[string]string{}, map[string]string{}
	var dbURL string
	for _, name := range gatewayReplicas {
		svc, ok := cf.Services[name]
		if !ok {
			continue // reported by the caller
		}
		env := map[string]string{}
		for k, v := range svc.Environment {
			if v != nil {
				env[k] = *v
			}
		}
		cfg, _, err := config.Load(copyEnv(env))
		if err != nil {
			t.Errorf("compose: %s environment does not load: %v", name, err)
			continue
		}
		u, err := url.Parse(env["GATEWAY_REDIS_URL"])
		if err != nil || u.Scheme != "redis" || u.Hostname() != "redis" || u.Port() != "6379" {
			t.Errorf("compose: %s GATEWAY_REDIS_URL %q, want redis://redis:6379/N (the redis service)", name, env["GATEWAY_REDIS_URL"])
		}
		if _, ok := svc.DependsOn["redis"]; !ok {
			t.Errorf("compose: %s does not depend on redis", name)
		}
		if other, dup := ids[cfg.ReplicaID]; dup || env["GATEWAY_REPLICA_ID"] == "" {
			t.Errorf("compose: %s GATEWAY_REPLICA_ID %q is unset or also %s's", name, env["GATEWAY_REPLICA_ID"], other)
		}
		ids[cfg.ReplicaID] = name
		if dbURL == "" {
			dbURL = env["GATEWAY_DATABASE_URL"]
		} else if env["GATEWAY_DATABASE_URL"] != dbURL {
			t.Errorf("compose: %s writes records to another database than %s", name, gatewayReplicas[0])
		}
		if got, want := mount(name, "deploy/"+routesFile), env["GATEWAY_CONFIG"]; got != want {
			t.Errorf("compose: %s mounts the routes file at %q but GATEWAY_CONFIG is %q", name, got, want)
		}
		spool := ""
		for _, v := range svc.Volumes {
			if v.Target == env["GATEWAY_SPOOL_DIR"] {
				spool = v.Source
			}
		}
		if other, dup := spools[spool]; spool == "" || dup {
			t.Errorf("compose: %s spool volume %q is missing or also %s's", name, spool, other)
		}
		spools[spool] = name
		for _, p := range svc.Ports {
			if other, dup := ports[p.Published]; dup {
				t.Errorf("compose: %s publishes port %s, like %s", name, p.Published, other)
			}
			ports[p.Published] = name
		}
	}
}
