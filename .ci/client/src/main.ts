// A client generated from the OpenAPI document that plantstore serves on
// /openapi.json calls the running service: 200 gives typed Plant[] equal to
// what a plain HTTP client received, following the Link header's next URL
// from a small limit lists the same plants page by page, and 400 and 401
// give the Error shape.
//
// Environment:
//   PLANTSTORE_API       base URL of the API listener, e.g. http://127.0.0.1:8080
//   PLANTSTORE_TOKEN     a bearer token the service accepts
//   PLANTSTORE_EXPECTED  the body of GET /plants with that token, fetched by curl
//
// Exit status: 0 when every check passes, 1 on any mismatch, 2 on bad usage.

import { isDeepStrictEqual } from "node:util";
import createClient from "openapi-fetch";
import type { components, paths } from "./plantstore";

type Plant = components["schemas"]["Plant"];
type ApiError = components["schemas"]["Error"];
type ListQuery = NonNullable<paths["/plants"]["get"]["parameters"]["query"]>;

// Compile-time checks: the generated types keep the seed's interface. A
// document that drops, renames or retypes a field fails `tsc`.
type Equals<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const plantShape: Equals<Plant, { name: string; tag?: string }> = true;
const errorShape: Equals<ApiError, { error: number; message: string }> = true;
const queryShape: Equals<ListQuery, { limit?: number; after?: string }> = true;
void [plantShape, errorShape, queryShape];

// Never called: it only has to compile, so the generated paths reject what
// the document does not describe.
export async function mustNotCompile(c: ReturnType<typeof createClient<paths>>): Promise<void> {
  // @ts-expect-error limit is an integer, not a string
  await c.GET("/plants", { params: { query: { limit: "2" } } });
  // @ts-expect-error no path but /plants is described
  await c.GET("/plant");
  // @ts-expect-error /plants is read-only
  await c.POST("/plants", {});
}

function env(name: string): string {
  const v = process.env[name];
  if (v === undefined || v === "") {
    console.error(`client: ${name} is not set`);
    process.exit(2);
  }
  return v;
}

const failures: string[] = [];

function check(ok: boolean, what: string): void {
  if (!ok) {
    failures.push(what);
  }
}

function isPlant(v: unknown): v is Plant {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    return false;
  }
  const keys = Object.keys(v).sort().join(",");
  const o = v as Record<string, unknown>;
  if (keys === "name") {
    return typeof o.name === "string" && o.name !== "";
  }
  return keys === "name,tag" && typeof o.name === "string" && o.name !== "" && typeof o.tag === "string";
}

function isApiError(v: unknown, status: number): v is ApiError {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    return false;
  }
  const o = v as Record<string, unknown>;
  return (
    Object.keys(o).sort().join(",") === "error,message" &&
    o.error === status &&
    Number.isInteger(o.error) &&
    typeof o.message === "string" &&
    o.message !== ""
  );
}

// nextLink returns the URL of a Link header's rel="next", the one form the
// service sends, or undefined when there is none.
function nextLink(link: string | null): string | undefined {
  const m = /^<([^<>]*)>; rel="next"$/.exec(link ?? "");
  return m === null ? undefined : m[1];
}

async function main(): Promise<void> {
  const baseUrl = env("PLANTSTORE_API");
  const token = env("PLANTSTORE_TOKEN");
  const expected: unknown = JSON.parse(env("PLANTSTORE_EXPECTED"));
  if (!Array.isArray(expected) || !expected.every(isPlant)) {
    console.error(`client: PLANTSTORE_EXPECTED is not a Plant array: ${JSON.stringify(expected)}`);
    process.exit(2);
  }

  const authed = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
  const anonymous = createClient<paths>({ baseUrl });
  const garbage = createClient<paths>({ baseUrl, headers: { Authorization: "Bearer not.a.jwt" } });

  {
    const { data, error, response } = await authed.GET("/plants");
    const plants: Plant[] | undefined = data;
    check(response.status === 200, `GET /plants: status ${response.status}, want 200`);
    check(error === undefined, `GET /plants: error ${JSON.stringify(error)}, want none`);
    check(Array.isArray(plants) && plants.every(isPlant), `GET /plants: body ${JSON.stringify(plants)} is not Plant[]`);
    check(
      isDeepStrictEqual(plants, expected),
      `GET /plants: body ${JSON.stringify(plants)}, want ${JSON.stringify(expected)} (as curl received it)`,
    );
  }

  for (const limit of [0, 1, 2]) {
    const { data, response } = await authed.GET("/plants", { params: { query: { limit } } });
    const plants: Plant[] | undefined = data;
    const want = expected.slice(0, limit);
    check(response.status === 200, `GET /plants?limit=${limit}: status ${response.status}, want 200`);
    check(
      isDeepStrictEqual(plants, want),
      `GET /plants?limit=${limit}: body ${JSON.stringify(plants)}, want ${JSON.stringify(want)}`,
    );
  }

  // Keyset paging: follow rel="next" until a page comes without it.
  for (const limit of [1, 2, 3]) {
    const walked: Plant[] = [];
    let query: ListQuery = { limit };
    let pages = 0;
    for (;;) {
      const { data, response } = await authed.GET("/plants", { params: { query } });
      pages++;
      check(response.status === 200, `paging limit=${limit}, page ${pages}: status ${response.status}, want 200`);
      const page: Plant[] = data ?? [];
      check(page.length <= limit, `paging limit=${limit}, page ${pages}: ${page.length} plants`);
      walked.push(...page);
      const next = nextLink(response.headers.get("Link"));
      if (next === undefined || pages > expected.length + 1) {
        break;
      }
      // The link keeps the query and sets after: read both back from it.
      const url = new URL(next, baseUrl);
      check(url.pathname === "/plants", `paging limit=${limit}: next ${next} is not /plants`);
      const after = url.searchParams.get("after");
      check(after !== null && after !== "", `paging limit=${limit}: next ${next} has no after`);
      query = { limit: Number(url.searchParams.get("limit")), after: after ?? "" };
    }
    const wantPages = Math.max(1, Math.ceil(expected.length / limit));
    check(pages === wantPages, `paging limit=${limit}: ${pages} pages, want ${wantPages}`);
    check(
      isDeepStrictEqual(walked, expected),
      `paging limit=${limit}: pages listed ${JSON.stringify(walked)}, want ${JSON.stringify(expected)}`,
    );
  }

  const errorCases: { name: string; status: number; client: typeof authed; limit?: number; after?: string }[] = [
    { name: "GET /plants?limit=-1", status: 400, client: authed, limit: -1 },
    { name: "GET /plants?limit=1&after=not-a-cursor", status: 400, client: authed, limit: 1, after: "not-a-cursor" },
    { name: "GET /plants without a token", status: 401, client: anonymous },
    { name: "GET /plants with a garbage token", status: 401, client: garbage },
  ];
  for (const tc of errorCases) {
    const { data, error, response } =
      tc.limit === undefined
        ? await tc.client.GET("/plants")
        : await tc.client.GET("/plants", {
            params: { query: tc.after === undefined ? { limit: tc.limit } : { limit: tc.limit, after: tc.after } },
          });
    const e: ApiError | undefined = error;
    check(response.status === tc.status, `${tc.name}: status ${response.status}, want ${tc.status}`);
    check(data === undefined, `${tc.name}: data ${JSON.stringify(data)}, want none`);
    check(
      isApiError(e, tc.status),
      `${tc.name}: error ${JSON.stringify(e)}, want {"error":${tc.status},"message":"<text>"}`,
    );
    if (tc.status === 401) {
      const wa = response.headers.get("WWW-Authenticate") ?? "";
      check(/^Bearer realm="plantstore"/.test(wa), `${tc.name}: WWW-Authenticate ${JSON.stringify(wa)}, want Bearer realm="plantstore"...`);
    }
  }

  if (failures.length > 0) {
    for (const f of failures) {
      console.error(`client: FAIL ${f}`);
    }
    process.exit(1);
  }
  console.log(`client: ok (${expected.length} plants typed as Plant[], also page by page; 400 and 401 typed as Error)`);
}

main().catch((err: unknown) => {
  console.error(`client: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  process.exit(1);
});
