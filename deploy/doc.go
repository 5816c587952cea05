// Package deploy holds no code: only the deployment files (Prometheus
// config and alert rules, Grafana provisioning and dashboard, the routes file
// of the compose stack) and the tests that validate them together with the
// repository's Dockerfile and docker-compose.yml. See README.md here.
package deploy
