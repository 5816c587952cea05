package routes

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/llmgw/gateway/internal/upstream"
)

// AzureConfig addresses an Azure OpenAI resource from a format openai
// provider whose base_url is the resource's endpoint
// (https://NAME.openai.azure.com). With a deployment, requests go to
// {base_url}/openai/deployments/{deployment}/chat/completions (and
// /embeddings) with ?api-version=; without one, to Azure's v1 API at
// {base_url}/openai/v1, which is plain OpenAI.
type AzureConfig struct {
	Deployment string `yaml:"deployment"`
	APIVersion string `yaml:"api_version"`
}

// AzureKeyHeader is the header Azure OpenAI takes a resource key in.
const AzureKeyHeader = "api-key"

// azureSegment is a deployment name as Azure allows them (letters,
// digits, -, _ and .): it goes into the URL's path.
var azureSegment = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// azureVersion is an api-version: a date, optionally with -preview.
var azureVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(-preview)?$|^(preview|latest)$`)

// azureBlock validates the azure block of provider p and rewrites its
// base_url and query to the deployment's (or the v1 API's) addressing,
// after base_url itself was validated.
func (v *validator) azureBlock(p *ProviderConfig, path string) error {
	az := p.Azure
	if az == nil {
		return nil
	}
	path += ".azure"
	if p.Format != upstream.FormatOpenAI {
		return v.fail(path, " applies only to format openai (this provider is %s)", p.Format)
	}
	dep, ver := strings.TrimSpace(az.Deployment), strings.TrimSpace(az.APIVersion)
	if dep != "" && !azureSegment.MatchString(dep) {
		return v.fail(path+".deployment", ": %s is not an Azure deployment name (letters, digits, -, _ and .)%s",
			quoteShort(dep), v.exp[path+".deployment"].origin())
	}
	if dep != "" && ver == "" {
		return v.fail(path+".api_version", " is required with a deployment, like \"2024-10-21\"")
	}
	if ver != "" && !azureVersion.MatchString(ver) {
		return v.fail(path+".api_version", ": %s is not an Azure api-version (like 2024-10-21 or 2025-04-01-preview)%s",
			quoteShort(ver), v.exp[path+".api_version"].origin())
	}
	if _, ok := p.Query["api-version"]; ok && ver != "" {
		return v.fail(path+".api_version", ": the provider's query sets api-version too; set it in one place")
	}
	u, _ := url.Parse(p.BaseURL) // validated by baseURL
	if strings.Contains(u.Path, "/openai") {
		return v.fail(path, ": base_url %s already has an /openai path; give the resource's endpoint (https://NAME.openai.azure.com) and let azure add the rest",
			quoteCut(RedactURL(p.BaseURL, v.keys), 200))
	}
	base := strings.TrimRight(p.BaseURL, "/")
	if dep == "" {
		p.BaseURL = base + "/openai/v1"
	} else {
		p.BaseURL = base + "/openai/deployments/" + dep
	}
	if ver != "" {
		if p.Query == nil {
			p.Query = map[string]string{}
		}
		p.Query["api-version"] = ver
	}
	az.Deployment, az.APIVersion = dep, ver
	return nil
}
