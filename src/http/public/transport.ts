// src/http/transport.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export {
  AllowInsecureHttp,
  HttpUrl,
  insecureHttpHost,
  insecureHttpMessage,
  isLoopbackHost,
} from '../transport.ts';
