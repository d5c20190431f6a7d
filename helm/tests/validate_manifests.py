"""Validates manifests rendered by `helm template`, offline. Called by scripts/check-chart.sh.

For every document in every file given:
  * Kubernetes kinds: the bundled OpenAPI-derived schemas of kubernetes-validate, in strict
    mode (an unknown or misspelt field is an error), for the Kubernetes version given.
  * Custom resources (ServiceMonitor, PrometheusRule): the schemas in helm/tests/schemas/;
    every alert rule has a summary and a runbook_url.
  * The Grafana dashboard ConfigMap: its JSON parses, panel ids are unique, every panel sits
    inside the 24-column grid and queries the dashboard's datasource variable.
  * A kind with no schema is an error, not a warning: nothing passes unchecked.
  * Pods (of CronJobs, Jobs, Deployments, test Pods): the Pod Security Standard "restricted"
    plus a read-only root filesystem.
  * The chart never renders a Secret (credentials come from existing Secrets).
  * The rotation policy ConfigMap validates against config/policy.schema.json (annotated
    keyroll.io/policy-form: settings: config/daemon-settings.schema.json, beside it).

With --rules-file, every group a PrometheusRule renders must equal the group of that name in
the plain rules file (config/prometheus-rules.yaml), runbook links aside, which may carry the
chart's runbookBaseUrl in front; with --extract-rules DIR, each PrometheusRule's groups are also
written to DIR/<name>.rules.yaml for `promtool check rules`.

Prints one `ERROR file: kind/name: problem` line per problem, and on the last line
`manifests=N`. Exit status 1 when any problem was found.
"""

import argparse
import json
import os
import sys

import jsonschema
import yaml
from kubernetes_validate import utils as kv

RESTRICTED_VOLUME_TYPES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}
CUSTOM_SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor-monitoring-v1.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule-monitoring-v1.json",
}
DASHBOARD_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def load_documents(path):
    with open(path, encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]


def pod_spec(doc):
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind in ("Deployment", "Job", "StatefulSet", "DaemonSet", "ReplicaSet"):
        return (spec.get("template") or {}).get("spec")
    if kind == "CronJob":
        job = (spec.get("jobTemplate") or {}).get("spec") or {}
        return (job.get("template") or {}).get("spec")
    return None


def restricted_problems(spec):
    """The checks of the Pod Security Standard 'restricted' (v1.31) that a pod spec alone decides."""
    problems = []
    pod_context = spec.get("securityContext") or {}
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(flag):
            problems.append(f"{flag} is set")
    for volume in spec.get("volumes") or []:
        types = set(volume) - {"name"}
        if not types <= RESTRICTED_VOLUME_TYPES:
            problems.append(f"volume {volume.get('name')} uses {sorted(types - RESTRICTED_VOLUME_TYPES)}")
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    for container in containers:
        name = container.get("name")
        context = container.get("securityContext") or {}

        def effective(key):
            return context.get(key, pod_context.get(key))

        if effective("runAsNonRoot") is not True:
            problems.append(f"container {name}: runAsNonRoot is not true")
        if effective("runAsUser") == 0:
            problems.append(f"container {name}: runAsUser is 0")
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"container {name}: allowPrivilegeEscalation is not false")
        if context.get("privileged"):
            problems.append(f"container {name}: privileged")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            problems.append(f"container {name}: capabilities.drop lacks ALL")
        if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
            problems.append(f"container {name}: adds capabilities {capabilities.get('add')}")
        seccomp = (effective("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"container {name}: seccompProfile is {seccomp!r}, not RuntimeDefault")
        if context.get("readOnlyRootFilesystem") is not True:
            problems.append(f"container {name}: readOnlyRootFilesystem is not true")
    return problems


def rule_problems(spec):
    """Every alert says what fired and where the runbook section is."""
    problems = []
    for group in spec.get("groups") or []:
        for rule in group.get("rules") or []:
            annotations = rule.get("annotations") or {}
            for key in ("summary", "runbook_url"):
                if "alert" in rule and not annotations.get(key):
                    problems.append(f"rule {rule['alert']} in group {group.get('name')} has no {key}")
    return problems


def with_relative_runbooks(group, plain_group):
    """The group with each runbook_url cut back to the plain file's, when it merely prefixes it."""
    plain_urls = {rule.get("alert"): (rule.get("annotations") or {}).get("runbook_url") for rule in plain_group.get("rules") or []}
    rules = []
    for rule in group.get("rules") or []:
        annotations = dict(rule.get("annotations") or {})
        plain = plain_urls.get(rule.get("alert"))
        if plain and str(annotations.get("runbook_url", "")).endswith("/" + plain):
            annotations["runbook_url"] = plain
        rules.append({**rule, "annotations": annotations})
    return {**group, "rules": rules}


def plain_file_problems(spec, plain_groups):
    problems = []
    for group in spec.get("groups") or []:
        plain = plain_groups.get(group.get("name"))
        if plain is None:
            problems.append(f"group {group.get('name')} is not in the plain rules file")
        elif with_relative_runbooks(group, plain) != plain:
            problems.append(f"group {group.get('name')} differs from the plain rules file")
    return problems


def dashboard_problems(text):
    """The dashboard JSON as Grafana's sidecar will load it."""
    try:
        dashboard = json.loads(text)
    except json.JSONDecodeError as error:
        return [f"dashboard JSON does not parse: {error}"]
    problems, ids = [], set()
    for panel in dashboard.get("panels") or []:
        name = f"panel {panel.get('id')} ({panel.get('title')})"
        if panel.get("id") in ids:
            problems.append(f"{name}: duplicate id")
        ids.add(panel.get("id"))
        grid = panel.get("gridPos") or {}
        if grid.get("x", -1) < 0 or grid.get("x", 0) + grid.get("w", 0) > 24 or grid.get("h", 0) < 1:
            problems.append(f"{name}: gridPos {grid} is outside the 24-column grid")
        if panel.get("type") == "row":
            continue
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{name}: no query")
        for target in [panel] + targets:
            if target.get("datasource") != DASHBOARD_DATASOURCE:
                problems.append(f"{name}: datasource is {target.get('datasource')}, not the $datasource variable")
    return problems


def validate_document(doc, version, schema_dir, policy_schema, plain_groups=None):
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    problems = []
    custom = CUSTOM_SCHEMAS.get((api_version, kind))
    try:
        if custom is not None:
            with open(os.path.join(schema_dir, custom), encoding="utf-8") as handle:
                jsonschema.validate(doc, json.load(handle))
        else:
            kv.validate(doc, version, strict=True)
    except kv.ValidationError as error:
        path = ".".join(str(item) for item in error.path)
        problems.append(f"{path}: {error.message}")
    except jsonschema.ValidationError as error:
        path = ".".join(str(item) for item in error.absolute_path)
        problems.append(f"{path}: {error.message}")
    except (kv.SchemaNotFoundError, kv.InvalidSchemaError) as error:
        problems.append(f"no schema to check it against ({error.message})")

    if kind == "PrometheusRule":
        problems.extend(rule_problems(doc.get("spec") or {}))
        if plain_groups is not None:
            problems.extend(plain_file_problems(doc.get("spec") or {}, plain_groups))
    if kind == "ConfigMap":
        for key, text in (doc.get("data") or {}).items():
            if key == "keyroll.json":
                problems.extend(f"{key}: {problem}" for problem in dashboard_problems(text))
    if kind == "Secret":
        problems.append("the chart renders a Secret; credentials must come from existing Secrets")
    spec = pod_spec(doc)
    if spec is not None:
        problems.extend(f"pod security: {problem}" for problem in restricted_problems(spec))
    if kind == "ConfigMap" and "policy.yaml" in (doc.get("data") or {}):
        # daemon.keysFrom kubernetes: the file holds the settings every key shares, not keys.
        form = ((doc.get("metadata") or {}).get("annotations") or {}).get("keyroll.io/policy-form")
        try:
            jsonschema.validate(yaml.safe_load(doc["data"]["policy.yaml"]), policy_schema[form or "policy"])
        except jsonschema.ValidationError as error:
            path = ".".join(str(item) for item in error.absolute_path)
            problems.append(f"policy.yaml {path}: {error.message}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubernetes-version", required=True)
    parser.add_argument("--schemas", required=True, help="folder of custom resource schemas")
    parser.add_argument("--policy-schema", required=True, help="config/policy.schema.json")
    parser.add_argument("--rules-file", help="config/prometheus-rules.yaml: rendered rule groups must equal its groups")
    parser.add_argument("--extract-rules", help="folder to write each PrometheusRule's groups to, as a rules file")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()

    plain_groups = None
    if args.rules_file:
        with open(args.rules_file, encoding="utf-8") as handle:
            plain_groups = {group["name"]: group for group in yaml.safe_load(handle)["groups"]}

    policy_schema = {}
    # The settings schema (config/daemon-settings.schema.json) sits beside the policy schema.
    settings_schema = os.path.join(os.path.dirname(args.policy_schema), "daemon-settings.schema.json")
    for form, schema_path in (("policy", args.policy_schema), ("settings", settings_schema)):
        with open(schema_path, encoding="utf-8") as handle:
            policy_schema[form] = json.load(handle)
    count, failed = 0, False
    for path in args.files:
        for doc in load_documents(path):
            count += 1
            name = f"{str(doc.get('kind')).lower()}/{(doc.get('metadata') or {}).get('name')}"
            for problem in validate_document(doc, args.kubernetes_version, args.schemas, policy_schema, plain_groups):
                print(f"ERROR {path}: {name}: {problem}")
                failed = True
            if args.extract_rules and doc.get("kind") == "PrometheusRule":
                target = os.path.join(args.extract_rules, f"{os.path.basename(path)}-{(doc.get('metadata') or {}).get('name')}.rules.yaml")
                with open(target, "w", encoding="utf-8") as handle:
                    yaml.safe_dump({"groups": (doc.get("spec") or {}).get("groups") or []}, handle, sort_keys=False)
    print(f"manifests={count}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
