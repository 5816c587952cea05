package mockupstream

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Gemini on Vertex AI: POST
// /v1/projects/{project}/locations/{location}/publishers/google/models/{model}:{method}
// answers as the Gemini API does (serveGemini), except that the credential is an
// OAuth2 access token (Authorization: Bearer) the mock issued at POST /token, its
// stand-in for a service account's token_uri. /token takes the JWT bearer grant
// (RFC 7523) and verifies the assertion as Google does: RS256 signed by the key of
// the service account EnableVertex was given, aud the token URI, scope
// cloud-platform, not expired. A request with any other token, or before
// EnableVertex, is refused 401 UNAUTHENTICATED, so a test notices a gateway that
// sends no token or one it made up. Behavior.TokenStatus fails /token (an outage of
// Google's token endpoint). batchEmbedContents is not served on Vertex.

// PathToken is the mock's token endpoint.
const PathToken = "/token"

// vertexScope is the scope a Vertex token must be asked for.
const vertexScope = "https://www.googleapis.com/auth/cloud-platform"

// vertexAuth is what EnableVertex set, and the tokens issued since.
type vertexAuth struct {
	pub      *rsa.PublicKey
	tokenURI string
	email    string

	mu     sync.Mutex
	issued map[string]bool
	calls  atomic.Uint64 // every POST /token, failed ones too
	seq    atomic.Uint64
}

// EnableVertex makes the Vertex paths and /token answer: assertions must be signed
// by pub's private key, name tokenURI (where the test's service-account key points
// /token) as their audience and email as their issuer. Tokens issued before are
// forgotten.
func (s *Server) EnableVertex(pub *rsa.PublicKey, tokenURI, email string) {
	s.vertex.Store(&vertexAuth{pub: pub, tokenURI: tokenURI, email: email, issued: map[string]bool{}})
}

// TokenCalls is how many POST /token requests the mock answered (failed ones too).
func (s *Server) TokenCalls() uint64 {
	if va := s.vertex.Load(); va != nil {
		return va.calls.Load()
	}
	return 0
}

// vertexModelsInfix is where a Vertex path's models collection starts.
const vertexModelsInfix = "/publishers/google/models/"

// vertexMethod splits a Vertex method path
// (/v1/projects/P/locations/L/publishers/google/models/M:method) into its model and
// method; ok is false for a path that is not one.
func vertexMethod(path string) (model, method string, ok bool) {
	rest, found := strings.CutPrefix(path, "/v1/projects/")
	if !found {
		return "", "", false
	}
	parts := strings.SplitN(rest, "/", 4) // P, "locations", L, "publishers/google/models/M:m"
	if len(parts) != 4 || parts[0] == "" || parts[1] != "locations" || parts[2] == "" {
		return "", "", false
	}
	m, found := strings.CutPrefix("/"+parts[3], vertexModelsInfix)
	i := strings.LastIndexByte(m, ':')
	if !found || i <= 0 || strings.Contains(m[:i], "/") {
		return "", "", false
	}
	return m[:i], m[i+1:], true
}

// vertexToken checks the request's bearer token: ok when the mock issued it.
func (s *Server) vertexToken(r *http.Request) (string, bool) {
	v, _ := headerValue(r.Header, "Authorization")
	tok, found := strings.CutPrefix(v, "Bearer ")
	va := s.vertex.Load()
	if !found || tok == "" || va == nil {
		return "", false
	}
	va.mu.Lock()
	defer va.mu.Unlock()
	return tok, va.issued[tok]
}

// serveToken is the token endpoint: the JWT bearer grant, answered as Google's is.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	va := s.vertex.Load()
	if va == nil {
		writeTokenError(w, http.StatusNotFound, "not_found", "EnableVertex was not called")
		return
	}
	va.calls.Add(1)
	if st := s.Behavior().TokenStatus; st != 0 {
		writeTokenError(w, st, "internal_failure", "the mock's token endpoint is failing (TokenStatus)")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		writeTokenError(w, http.StatusBadRequest, "invalid_request", "read body")
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		writeTokenError(w, http.StatusBadRequest, "unsupported_grant_type", "expected the JWT bearer grant")
		return
	}
	if err := va.verify(form.Get("assertion"), time.Now()); err != nil {
		writeTokenError(w, http.StatusBadRequest, "invalid_grant", err.Error())
		return
	}
	tok := "mock-vertex-token-" + strconv.FormatUint(va.seq.Add(1), 10)
	va.mu.Lock()
	va.issued[tok] = true
	va.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"access_token": tok, "expires_in": 3600, "token_type": "Bearer"})
	writeJSON(w, http.StatusOK, b)
}

// verify checks a JWT assertion: RS256 under va.pub, and the claims Google checks.
func (va *vertexAuth) verify(assertion string, now time.Time) error {
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		return errors.New("the assertion is not a JWT")
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss   string `json:"iss"`
		Aud   string `json:"aud"`
		Scope string `json:"scope"`
		Exp   int64  `json:"exp"`
		Iat   int64  `json:"iat"`
	}
	if err := decodeSegment(parts[0], &hdr); err != nil || hdr.Alg != "RS256" {
		return errors.New("the assertion's header is not RS256")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return errors.New("the assertion's signature is not base64url")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(va.pub, crypto.SHA256, sum[:], sig) != nil {
		return errors.New("invalid JWT Signature") // Google's words
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return errors.New("the assertion's claims are not JSON")
	}
	switch {
	case claims.Aud != va.tokenURI:
		return errors.New("the assertion's aud is not the token URI")
	case !strings.Contains(" "+claims.Scope+" ", " "+vertexScope+" "):
		return errors.New("the assertion does not ask for the cloud-platform scope")
	case va.email != "" && claims.Iss != va.email:
		return errors.New("the assertion's iss is not the service account")
	case claims.Exp <= now.Unix() || claims.Iat > now.Add(time.Minute).Unix():
		return errors.New("the assertion is expired or not yet valid")
	}
	return nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// writeTokenError answers as an OAuth2 token endpoint does (RFC 6749 5.2).
func writeTokenError(w http.ResponseWriter, status int, code, desc string) {
	b, _ := json.Marshal(map[string]string{"error": code, "error_description": desc})
	writeJSON(w, status, b)
}

// VertexServiceAccount makes a service account for a test: a fresh RSA key, whose
// public half EnableVertex is given, and the JSON key file (type service_account,
// token_uri tokenURI) the gateway's credentials_file would hold. Extra fields are
// added to the file as they are (a private_key_id, say).
func (s *Server) VertexServiceAccount(tokenURI string, extra map[string]string) ([]byte, *rsa.PrivateKey, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	const email = "gateway@mock-project.iam.gserviceaccount.com"
	f := map[string]string{
		"type": "service_account", "project_id": "mock-project", "client_email": email, "client_id": "1",
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": tokenURI,
	}
	maps.Copy(f, extra)
	b, err := json.Marshal(f)
	if err != nil {
		return nil, nil, err
	}
	s.EnableVertex(&k.PublicKey, tokenURI, email)
	return b, k, nil
}
