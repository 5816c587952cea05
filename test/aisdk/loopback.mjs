// Every script here talks to the gateway under test and to nothing else: this
// replaces fetch (which the AI SDK and the openai package both use) with one
// that refuses any other origin, so a default that phones home (tracing, a
// model list, an image download) fails the check instead of reaching the
// network.
export function onlyGateway(baseURL) {
  const origin = new URL(baseURL).origin;
  const realFetch = globalThis.fetch;
  globalThis.fetch = (input, init) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    if (url.origin !== origin) {
      return Promise.reject(new Error(`refused a request to ${url.origin}: only the gateway at ${origin} may be called`));
    }
    return realFetch(input, init);
  };
}

// A 1x1 PNG, the image part both scripts send.
export const pixelPNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');

// print writes one JSON line for the Go test.
export function print(obj) {
  console.log(JSON.stringify(obj));
}
