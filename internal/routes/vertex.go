package routes

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/llmgw/gateway/internal/upstream"
)

// VertexConfig is where a format vertex provider's models live: the
// Google Cloud project and location (region) of
// {location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}.
type VertexConfig struct {
	Project  string `yaml:"project"`
	Location string `yaml:"location"`
}

// ServiceAccount is a service-account JSON key read from credentials_file.
// JSON is the file's bytes, handed to the OAuth2 library as they are;
// PrivateKey is kept apart so the gateway can redact it wherever it might
// show up. Neither is ever shown.
type ServiceAccount struct {
	JSON        []byte
	ClientEmail string
	TokenURI    string
	PrivateKey  string
}

// maxCredentialsBytes bounds credentials_file: a key file is ~2.3 KiB.
const maxCredentialsBytes = 1 << 20

// vertexSegment is a project id or location as Google spells them: they
// go into the URL's path, so nothing that could change its shape.
var vertexSegment = regexp.MustCompile(`^[a-z0-9][a-z0-9.:_-]*$`)

// vertexBlock validates the vertex block of provider p and, for format
// vertex without a base_url, fills in the location's regional host.
func (v *validator) vertexBlock(p *ProviderConfig, path string) error {
	if p.Format != upstream.FormatVertex {
		if _, written := v.lines[path+".vertex"]; written {
			return v.fail(path+".vertex", " applies only to format vertex (this provider is %s)", p.Format)
		}
	} else {
		for _, f := range []struct{ name, val string }{{"project", p.Vertex.Project}, {"location", p.Vertex.Location}} {
			fp := path + ".vertex." + f.name
			val := strings.TrimSpace(f.val)
			if val == "" {
				return v.fail(fp, " is required for format vertex%s", v.exp[fp].origin())
			}
			if !vertexSegment.MatchString(val) {
				return v.fail(fp, ": %s is not a Google Cloud %s (lower-case letters, digits, -)%s", quoteShort(val), f.name, v.exp[fp].origin())
			}
		}
		p.Vertex.Project, p.Vertex.Location = strings.TrimSpace(p.Vertex.Project), strings.TrimSpace(p.Vertex.Location)
		if _, written := v.lines[path+".base_url"]; !written {
			p.BaseURL = "https://" + p.Vertex.Location + "-aiplatform.googleapis.com"
			if p.Vertex.Location == "global" {
				// The global endpoint has no region in its host.
				p.BaseURL = "https://aiplatform.googleapis.com"
			}
		}
	}
	return nil
}

// credentials validates credentials_file, reading and checking the key so
// that a reload with a missing or broken one fails while the routes in
// service keep serving.
func (v *validator) credentials(p *ProviderConfig, path string) error {
	if p.Auth.Style != AuthGoogleServiceAccount {
		if p.CredentialsFile != "" {
			return v.fail(path+".credentials_file", " applies only to auth google_service_account")
		}
		return nil
	}
	fp := path + ".credentials_file"
	if strings.TrimSpace(p.CredentialsFile) == "" {
		return v.fail(fp, " is required with auth google_service_account: the path of a service-account JSON key%s", v.exp[fp].origin())
	}
	// A relative path is the process's working directory's, as for
	// GATEWAY_CONFIG itself.
	sa, err := readServiceAccount(p.CredentialsFile)
	if err != nil {
		return v.fail(fp, ": %v%s", err, v.exp[fp].origin())
	}
	p.Credentials = sa
	return nil
}

// readServiceAccount reads and checks a service-account key file. Its
// errors name what is wrong, never a value from the file.
func readServiceAccount(name string) (*ServiceAccount, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err // names the path and why (missing, no permission)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCredentialsBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCredentialsBytes {
		return nil, fmt.Errorf("%s is larger than a service-account key (1 MiB)", quoteShort(name))
	}
	var k struct {
		Type        string `json:"type"`
		ClientEmail string `json:"client_email"`
		PrivateKey  string `json:"private_key"`
		TokenURI    string `json:"token_uri"`
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s is not a service-account JSON key (not JSON)", quoteShort(name))
	}
	switch {
	case k.Type != "service_account":
		return nil, fmt.Errorf("%s is not a service-account JSON key (type is not service_account)", quoteShort(name))
	case k.ClientEmail == "":
		return nil, fmt.Errorf("%s has no client_email", quoteShort(name))
	case k.PrivateKey == "":
		return nil, fmt.Errorf("%s has no private_key", quoteShort(name))
	}
	if err := checkPrivateKey(k.PrivateKey); err != nil {
		return nil, fmt.Errorf("%s: private_key %v", quoteShort(name), err)
	}
	if k.TokenURI == "" {
		// The library's default; named here so check-config shows it.
		k.TokenURI = "https://oauth2.googleapis.com/token"
	}
	if u, err := url.Parse(k.TokenURI); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("%s: token_uri is not an absolute http(s) URL", quoteShort(name))
	}
	return &ServiceAccount{JSON: b, ClientEmail: k.ClientEmail, TokenURI: k.TokenURI, PrivateKey: k.PrivateKey}, nil
}

// checkPrivateKey parses the key as the OAuth2 library will when it signs
// the first assertion: a PEM RSA key, PKCS#8 or PKCS#1. Done at load, so a
// truncated key fails there rather than at the first request.
func checkPrivateKey(s string) error {
	blk, _ := pem.Decode([]byte(s))
	if blk == nil {
		return errors.New("is not PEM")
	}
	if k, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err == nil {
		if _, ok := k.(*rsa.PrivateKey); ok {
			return nil
		}
	}
	if _, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
		return nil
	}
	return errors.New("is not an RSA private key")
}
