"""``switchyard keys``: create inbound API keys for the proxy and print the hash the config stores."""

from __future__ import annotations

import argparse
import json
import sys

from switchyard.cli._common import HelpFormatter, fail

_EPILOG = """\
Examples:
  switchyard keys create --name ci --routes agent,cheap --budget 5
  echo -n "$MY_KEY" | switchyard keys hash

`create` prints the new key once (give it to the client; it is not stored anywhere) and the
server.api_keys entry to paste into the config, which holds only the key's SHA-256:

  server:
    api_keys:
      - name: ci
        hash: sha256:3f1c...
        routes: [agent, cheap]        # "*" (default): every route
        budget_usd_per_day: 5         # optional; 429 once today's spend reaches it

Clients send the key as `Authorization: Bearer <key>` (OpenAI SDKs: api_key=), `x-api-key`
(Anthropic SDKs) or `api-key`. Instead of a hash, an entry may name an environment variable
holding the key: `key_env: SWITCHYARD_KEY_CI`.

Each key is its own tenant: its sessions, threads and router state are its own, whatever
session ids another key sends. To let several keys share them (a team's laptops and CI):

  server:
    tenants:
      ci-team: {keys: [ci, ci-nightly]}

See docs/security.md ("Tenancy model").
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "keys",
        help="create inbound API keys for the proxy (server.api_keys)",
        description="Create an inbound API key for `switchyard serve`, or hash an existing one.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    actions = p.add_subparsers(dest="keys_action", metavar="ACTION")
    create = actions.add_parser("create", help="make a new random key and print its config entry")
    create.add_argument("--name", default="default", help="label for records and budgets")
    create.add_argument("--routes", default="*", help="comma-separated routes the key may use ('*': all)")
    create.add_argument("--budget", type=float, metavar="USD", help="spend allowed per UTC day")
    create.set_defaults(func=run_create)
    hashing = actions.add_parser("hash", help="print the sha256: form of a key read from stdin")
    hashing.set_defaults(func=run_hash)

    def usage(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=usage)


def _entry(name: str, digest: str, routes: list[str], budget: float | None) -> str:
    # JSON strings are YAML flow scalars: a name or route with ': ', '#' or quotes stays one value.
    lines = [
        "server:",
        "  api_keys:",
        f"    - name: {json.dumps(name)}",
        f"      hash: {digest}",
        f"      routes: [{', '.join(json.dumps(r) for r in routes)}]",
    ]
    if budget is not None:
        lines.append(f"      budget_usd_per_day: {budget:g}")
    return "\n".join(lines)


def run_create(args: argparse.Namespace) -> int:
    from switchyard.server.auth import hash_key, new_key

    routes = [r.strip() for r in str(args.routes).split(",") if r.strip()] or ["*"]
    if args.budget is not None and args.budget < 0:
        return fail("--budget must be >= 0")
    key = new_key()
    print(f"key (shown once, give it to the client): {key}")
    print()
    print("config entry:")
    print(_entry(args.name, hash_key(key), routes, args.budget))
    return 0


def run_hash(args: argparse.Namespace) -> int:
    from switchyard.server.auth import hash_key

    key = sys.stdin.read().strip()
    if not key:
        return fail('no key on stdin (echo -n "$KEY" | switchyard keys hash)')
    print(hash_key(key))
    return 0
