package mockupstream

import (
	"net/http"
	"strings"
)

// Azure OpenAI's addressing: a deployment's routes,
// /openai/deployments/{deployment}/chat/completions (and /embeddings),
// which need ?api-version=, and the v1 API under /openai/v1, which is
// OpenAI's. The bodies are OpenAI's either way.

// azureEndpoint maps an Azure path to its model endpoint; deployment says
// whether it is a deployment's route (which needs an api-version).
func azureEndpoint(path string) (ep endpoint, deployment, ok bool) {
	var rest string
	switch {
	case strings.HasPrefix(path, "/openai/v1/"):
		rest = strings.TrimPrefix(path, "/openai/v1")
	case strings.HasPrefix(path, "/openai/deployments/"):
		name, after, found := strings.Cut(strings.TrimPrefix(path, "/openai/deployments/"), "/")
		if !found || name == "" {
			return 0, false, false
		}
		rest, deployment = "/"+after, true
	default:
		return 0, false, false
	}
	switch rest {
	case "/chat/completions":
		return epChat, deployment, true
	case "/embeddings":
		return epEmbeddings, deployment, true
	case "/responses":
		return epResponses, deployment, !deployment
	}
	return 0, false, false
}

// serveAzure answers an Azure route: a deployment's without an api-version
// gets Azure's 404, as the service does; the rest is the OpenAI route's.
func (s *Server) serveAzure(w http.ResponseWriter, r *http.Request, ep endpoint, deployment bool) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	if deployment && r.URL.Query().Get("api-version") == "" {
		writeJSON(w, http.StatusNotFound, []byte(`{"error":{"code":"404","message":"Resource not found"}}`))
		return
	}
	switch ep {
	case epChat:
		s.serveChat(w, r)
	case epEmbeddings:
		s.serveEmbeddings(w, r)
	case epResponses:
		s.serveResponses(w, r)
	}
}
