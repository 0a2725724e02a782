"""The ClusterColocationProfile controller: each profile kept as its MutatingAdmissionPolicy.

Imports `kube`, `manager.colocationprofile` and `manager.probability` only.

Informers on ClusterColocationProfiles, PriorityClasses and the
MutatingAdmissionPolicies (+ bindings) labelled
`app.kubernetes.io/managed-by: nodeqos-manager` (views of the process's shared
informers, `kube.informerset.Informers`). Any event queues the one key `PASS` of
its `kube.controller.Controller` (leader only): every profile is rendered with `colocationprofile.render` (its
PriorityClass value looked up from the cache) and each rendered object is
created, or replaced when its labels or spec differ; managed objects no profile
renders any more are deleted. A profile that cannot be rendered keeps whatever
policy it had, is logged, and gets a Warning Event `ColocationProfileInvalid`
(once per resourceVersion; the record of what was reported is pruned as
profiles go away or change): the loop never stops on one. A pass with a failed
write raises after the rest are sent, so the runtime retries it with backoff; an
unavailable API server stops the pass at once and closes the runtime's outage
gate (docs/manager.md, "The controller runtime and retries").

With a `Webhook` (the manager serves `manager.probability`), profiles with a probability
between 1% and 99% also get a webhook in the MutatingWebhookConfiguration
`nodeqos-colocation-probability`, kept like the policies (deleted when none is left);
without one, such a profile is invalid ("needs --webhook-addr").

Two paths apply the profiles (`--profile-path`): `policy` renders the MutatingAdmissionPolicies
above; `webhook` keeps one MutatingWebhookConfiguration `nodeqos-colocation-profiles` pointing
at the manager's `/profiles` (`manager.profilemutation`, the same semantics, every replica
serving it from its own informers, the Namespaces among them). `auto` asks discovery whether
`admissionregistration.k8s.io/v1` serves `mutatingadmissionpolicies` (Kubernetes >= 1.36),
again every resync and after a write answered 404. A switch creates the new path's objects
first and deletes the old path's only after every create succeeded: for a moment both apply,
which the idempotent mutations make harmless (docs/colocation.md, "Two paths"). Each profile
gets a Normal Event `ColocationProfilePath` naming the path that applies it.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kube import cache, controller, events, informerset, rest
from manager import colocationprofile, probability, profilemutation, telemetry

log = logging.getLogger("manager.profiles")

MANAGED = "app.kubernetes.io/managed-by=nodeqos-manager"
INVALID_REASON = "ColocationProfileInvalid"
PROFILES = cache.Resource("config.koordinator.sh", "v1alpha1", "clustercolocationprofiles", False)
PASS = "pass"
"""The controller's one work-queue key: a pass covers every profile."""
PREEMPT_DEFAULT = "PreemptLowerPriority"  # a PriorityClass without preemptionPolicy
PRIORITY_CLASSES = cache.Resource("scheduling.k8s.io", "v1", "priorityclasses", False)
POLICIES = cache.Resource("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies", False)
BINDINGS = cache.Resource(
    "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings", False
)
WEBHOOKS = cache.Resource(
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", False
)
NAMESPACES = cache.Resource("", "v1", "namespaces", False)
PATH_REASON = "ColocationProfilePath"
UNREACHABLE_REASON = "ColocationProfileWebhookUnreachable"
# How long a pass waits for its check of the webhook: the check's own 3 s timeout bounds
# the connection, not the Service's name lookup (getaddrinfo takes no timeout), so the
# check runs in a thread of its own and the pass waits this long at most.
PROBE_WAIT = 4.0
PATHS = ("auto", "policy", "webhook")
DISCOVERY = "/apis/admissionregistration.k8s.io/v1"


def serves_policies(client: rest.Rest) -> bool:
    """Whether the API server serves MutatingAdmissionPolicy v1 (discovery of the group
    version lists `mutatingadmissionpolicies`; a 404 of the group version says no)."""
    try:
        found = client.get(DISCOVERY)
    except rest.ApiError as err:
        if err.not_found:
            return False
        raise
    return any(r.get("name") == "mutatingadmissionpolicies" for r in (found.get("resources") or []))


RESOURCES = {
    "MutatingAdmissionPolicy": POLICIES,
    "MutatingAdmissionPolicyBinding": BINDINGS,
    "MutatingWebhookConfiguration": WEBHOOKS,
}


@dataclass(frozen=True, slots=True)
class Webhook:
    """Where the API server reaches the manager's probability webhook, and its CA."""

    client_config: Mapping[str, Any]
    ca_pem: bytes


class ProfileController:
    """Informers plus the pass that makes the managed policies follow the profiles."""

    def __init__(
        self,
        client: rest.Rest,
        recorder: events.Recorder | None,
        *,
        resync_seconds: float = 300.0,
        webhook: Webhook | None = None,
        metrics: telemetry.Metrics | None = None,
        informers: informerset.Informers | None = None,
        profile_path: str = "auto",
        discover: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
        draw: Callable[[], int] = lambda: random.randrange(100),
        probe: Callable[[Mapping[str, Any], bytes, str], str | None] = probability.unreachable,
        probe_wait: float = PROBE_WAIT,
    ) -> None:
        if profile_path not in PATHS:
            raise ValueError(f"profile path must be one of {', '.join(PATHS)}: {profile_path!r}")
        self._client = client
        self._mode = profile_path
        self._discover = discover or functools.partial(serves_policies, client)
        self._clock = clock
        self._draw = draw
        self._probe = probe
        self._probe_wait = probe_wait
        self._probing: threading.Thread | None = None
        self._resync = resync_seconds
        self._checked_at: float | None = None
        self._path_reported: set[tuple[str, str, str]] = set()
        self._down_reported: set[str] = set()  # profiles told the webhook is unreachable
        # name -> (resourceVersion, parsed profile or None when invalid)
        self._parsed_cache: dict[str, tuple[str, colocationprofile.Profile | None]] = {}
        self._metrics = metrics
        self._webhook = webhook
        self._recorder = recorder
        self._reported: set[tuple[str, str]] = set()
        self.writes = 0
        self._failed = 0  # writes of the running pass that failed
        self.informers_set = informers or informerset.Informers(client)
        shared = self.informers_set
        self.profiles: informerset.View[Mapping[str, Any]] = shared.watch(
            PROFILES, name="colocation-profiles"
        ).view(on_event=self._poke)
        self.priority_classes: informerset.View[Mapping[str, Any]] = shared.watch(
            PRIORITY_CLASSES
        ).view(on_event=self._poke)
        self.owned: dict[str, informerset.View[Mapping[str, Any]]] = {}
        self._started = False
        # Whether the server serves the policies: their informers exist only then (a list
        # of a resource not served never syncs). Forced `webhook` still looks, to delete.
        try:
            self.serves_policies = self._discover()
            self._checked_at = self._clock()
        except (rest.ApiError, rest.ApiUnavailable) as err:
            # Unknown: no policy informers yet; the first pass asks again before it acts.
            log.warning("discovery of MutatingAdmissionPolicy failed: %s (asked again)", err)
            self.serves_policies = False
        if self.serves_policies:
            self._watch_policies()
        self.namespaces: informerset.View[Mapping[str, Any]] | None = None
        if webhook is not None:
            self.owned["MutatingWebhookConfiguration"] = shared.watch(
                WEBHOOKS, label_selector=MANAGED
            ).view(on_event=self._poke)
            self.namespaces = shared.watch(NAMESPACES).view()
        self.runtime = controller.Controller(
            "colocation-profiles",
            self._sync,
            keys=lambda: [PASS],
            resync_seconds=resync_seconds,
            synced=lambda: self.synced,
        )

    def _watch_policies(self) -> None:
        for kind, resource in (
            ("MutatingAdmissionPolicy", POLICIES),
            ("MutatingAdmissionPolicyBinding", BINDINGS),
        ):
            if kind not in self.owned:
                shared = self.informers_set.watch(resource, label_selector=MANAGED)
                self.owned[kind] = shared.view(on_event=self._poke)
                if self._started:
                    shared.informer.start()

    @property
    def path(self) -> str:
        """The path that applies the profiles now: "policy" or "webhook"."""
        if self._mode != "auto":
            return self._mode
        return "policy" if self.serves_policies else "webhook"

    def recheck(self, *, force: bool = False) -> None:
        """Ask discovery again if a resync has passed since (or `force`: a write got 404)."""
        now = self._clock()
        if not force and self._checked_at is not None and now - self._checked_at < self._resync:
            return
        self._checked_at = now
        try:
            served = self._discover()
        except (rest.ApiError, rest.ApiUnavailable) as err:
            log.warning("discovery of MutatingAdmissionPolicy failed: %s (kept %s)", err, self.path)
            return
        if served != self.serves_policies:
            log.info(
                "the API server %s MutatingAdmissionPolicy v1",
                "serves" if served else "no longer serves",
            )
            self.serves_policies = served
            if served:
                self._watch_policies()

    def _poke(self, _kind: str, _old: object, _new: object) -> None:
        self.runtime.add(PASS)

    def informers(self) -> list[informerset.View[Any]]:
        found = [self.profiles, self.priority_classes, *self.owned.values()]
        return found + ([self.namespaces] if self.namespaces is not None else [])

    def start(self) -> None:
        """Start the informers (every one of the set: it may be this controller's own)."""
        self._started = True
        self.informers_set.start()

    def stop(self) -> None:
        self.informers_set.stop()

    @property
    def synced(self) -> bool:
        return all(i.synced for i in self.informers())

    def wake(self) -> None:
        self.runtime.add(PASS)

    def desired(self) -> tuple[dict[str, dict[str, Any]], set[str]]:
        """Rendered objects by "Kind/name", and the names of profiles that failed."""
        wanted: dict[str, dict[str, Any]] = {}
        failed: set[str] = set()
        drawn: list[probability.Entry] = []
        profiles = self.profiles.items()
        self._prune_reported(profiles)
        for obj in profiles:
            meta = obj.get("metadata") or {}
            name = str(meta.get("name", ""))
            try:
                profile = colocationprofile.Profile.from_api(obj)
                value, preemption = None, None
                if profile.priority_class_name:
                    pc = self.priority_classes.get(profile.priority_class_name)
                    if pc is not None:
                        value = int(pc.get("value", 0))
                        preemption = str(pc.get("preemptionPolicy") or PREEMPT_DEFAULT)
                if self.path == "webhook" and self._webhook is None:
                    raise colocationprofile.ProfileError(
                        "the API server does not serve MutatingAdmissionPolicy v1 (or"
                        " --profile-path=webhook): profiles are applied by the manager's"
                        " webhook, which is off (--webhook-addr)"
                    )
                if 0 < profile.percent < 100 and self._webhook is None:
                    raise colocationprofile.ProfileError(
                        f"spec.probability: {profile.percent}% is drawn per pod by the"
                        " manager's webhook, which is off (--webhook-addr)"
                    )
                rendered = colocationprofile.render(
                    profile, priority_value=value, preemption_policy=preemption
                )
            except (colocationprofile.ProfileError, ValueError, TypeError) as err:
                failed.add(f"nodeqos-colocation-{name}")
                self._report(obj, str(err))
                continue
            self._report_path(obj, profile)
            if self.path == "webhook":
                continue  # rendered only to refuse what the policy path refuses, the same way
            for item in rendered:
                wanted[f"{item['kind']}/{item['metadata']['name']}"] = item
            if 0 < profile.percent < 100:
                drawn.append(probability.Entry(name, profile.namespace_selector, profile.selector))
        if self.path == "webhook" and self._webhook is not None and profiles:
            config = profilemutation.configuration(
                self._webhook.client_config, self._webhook.ca_pem
            )
            wanted[f"MutatingWebhookConfiguration/{profilemutation.CONFIGURATION}"] = config
        elif self._webhook is not None and drawn:
            config = probability.configuration(
                drawn, self._webhook.client_config, self._webhook.ca_pem
            )
            wanted[f"MutatingWebhookConfiguration/{probability.CONFIGURATION}"] = config
        return wanted, failed

    def _report_path(self, obj: Mapping[str, Any], profile: colocationprofile.Profile) -> None:
        """A Normal Event, once per resourceVersion and path, naming the path."""
        meta = obj.get("metadata") or {}
        key = (profile.name, str(meta.get("resourceVersion", "")), self.path)
        if key in self._path_reported or self._recorder is None:
            return
        self._path_reported = {k for k in self._path_reported if k[0] != profile.name}
        self._path_reported.add(key)
        how = (
            "MutatingAdmissionPolicy nodeqos-colocation-" + profile.name
            if self.path == "policy"
            else f"the manager's webhook ({profilemutation.CONFIGURATION})"
        )
        ref = events.ObjectRef(
            kind="ClusterColocationProfile",
            name=profile.name,
            uid=str(meta.get("uid", "")),
            api_version="config.koordinator.sh/v1alpha1",
        )
        self._recorder.event(ref, events.NORMAL, PATH_REASON, f"path {self.path}: applied by {how}")

    def _check_webhook(self) -> None:
        """The webhook path's server, reached as the API server reaches it (bounded 3 s):
        `nodeqos_manager_profile_webhook_up`, and while it is down a Warning Event per
        profile (pods are created without the profiles: failurePolicy Ignore)."""
        if self._webhook is None:
            return
        why = self._bounded_probe(self._webhook)
        if self._metrics is not None:
            self._metrics.profile_webhook_up.set(0 if why else 1)
        if why is None:
            self._down_reported.clear()
            return
        log.warning("the profiles webhook is unreachable: %s", why)
        for obj in self.profiles.items():
            meta = obj.get("metadata") or {}
            name = str(meta.get("name", ""))
            if name in self._down_reported or self._recorder is None:
                continue
            self._down_reported.add(name)
            ref = events.ObjectRef(
                kind="ClusterColocationProfile",
                name=name,
                uid=str(meta.get("uid", "")),
                api_version="config.koordinator.sh/v1alpha1",
            )
            message = f"pods are created without this profile (failurePolicy Ignore): {why}"
            self._recorder.event(ref, events.WARNING, UNREACHABLE_REASON, message[:1000])

    def _bounded_probe(self, webhook: Webhook) -> str | None:
        """The check, waited on for `probe_wait` s at most; one at a time (a check still
        hanging from an earlier pass counts as the webhook not answering)."""
        if self._probing is not None and self._probing.is_alive():
            return "an earlier check of the webhook has not returned (a hung name lookup?)"
        answer: list[str | None] = []

        def check() -> None:
            answer.append(
                self._probe(webhook.client_config, webhook.ca_pem, probability.PROFILES_PATH)
            )

        self._probing = threading.Thread(target=check, name="profile-webhook-check", daemon=True)
        self._probing.start()
        self._probing.join(self._probe_wait)
        return answer[0] if answer else f"no answer to the check in {self._probe_wait:g} s"

    def _parsed(self, obj: Mapping[str, Any]) -> colocationprofile.Profile | None:
        """The profile parsed once per resourceVersion (the webhook asks on every pod)."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("name", "")), str(meta.get("resourceVersion", "")))
        cached = self._parsed_cache.get(key[0])
        if cached is not None and cached[0] == key[1]:
            return cached[1]
        try:
            profile: colocationprofile.Profile | None = colocationprofile.Profile.from_api(obj)
        except (colocationprofile.ProfileError, ValueError, TypeError):
            profile = None  # reported by the pass
        if len(self._parsed_cache) > 4 * len(self.profiles) + 16:
            self._parsed_cache.clear()  # bounded: profiles deleted since
        self._parsed_cache[key[0]] = (key[1], profile)
        return profile

    def applied(self) -> list[profilemutation.Applied]:
        """The valid profiles as the webhook path applies them (their PriorityClass looked up)."""
        found = []
        for obj in self.profiles.items():
            profile = self._parsed(obj)
            if profile is None:
                continue
            value, preemption = None, None
            if profile.priority_class_name:
                pc = self.priority_classes.get(profile.priority_class_name)
                if pc is not None:
                    value = int(pc.get("value", 0))
                    preemption = str(pc.get("preemptionPolicy") or PREEMPT_DEFAULT)
            found.append(profilemutation.Applied(profile, value, preemption))
        return found

    def review(
        self, review: dict[str, Any], record: Callable[[str], None] = lambda _o: None
    ) -> dict[str, Any]:
        """The `/profiles` answer for one AdmissionReview, from this replica's informers."""

        def labels(name: str) -> Mapping[str, str] | None:
            if self.namespaces is None or not self.namespaces.synced:
                return None
            ns = self.namespaces.get(name)
            return None if ns is None else dict((ns.get("metadata") or {}).get("labels") or {})

        return profilemutation.review_response(review, self.applied(), labels, self._draw, record)

    def percent(self, name: str) -> int | None:
        """The probability of profile `name` for the webhook; None if unknown or invalid."""
        obj = self.profiles.get(name)
        if obj is None:
            return None
        try:
            return colocationprofile.Profile.from_api(obj).percent
        except (colocationprofile.ProfileError, ValueError, TypeError):
            return None

    @property
    def reported(self) -> frozenset[str]:
        """Names of the invalid profiles reported (and remembered) now."""
        return frozenset(name for name, _version in self._reported)

    def _prune_reported(self, profiles: list[Mapping[str, Any]]) -> None:
        """Forget reports of profiles gone or changed since (bounded memory)."""
        current = {
            (str(meta.get("name", "")), str(meta.get("resourceVersion", "")))
            for meta in ((obj.get("metadata") or {}) for obj in profiles)
        }
        self._reported &= current

    def _report(self, obj: Mapping[str, Any], message: str) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("name", "")), str(meta.get("resourceVersion", "")))
        if key in self._reported:
            return
        self._reported.add(key)
        log.error("ClusterColocationProfile %s cannot be rendered: %s", key[0], message)
        if self._recorder is not None:
            ref = events.ObjectRef(
                kind="ClusterColocationProfile",
                name=key[0],
                uid=str(meta.get("uid", "")),
                api_version="config.koordinator.sh/v1alpha1",
            )
            self._recorder.event(ref, events.WARNING, INVALID_REASON, message[:1000])

    def reconcile(self) -> int:
        """One pass; returns the writes it sent. A write finding the API server
        unavailable ends the pass (raises rest.ApiUnavailable)."""
        self._failed = 0
        self.recheck()
        if not self.synced:  # the policies' informers were just added: act once they list
            self._failed += 1
            return 0
        if self._metrics is not None:
            for path in ("policy", "webhook"):
                self._metrics.profile_path.labels(path).set(1 if path == self.path else 0)
        wanted, failed = self.desired()
        if f"MutatingWebhookConfiguration/{profilemutation.CONFIGURATION}" in wanted:
            self._check_webhook()
        before = self.writes
        resources = RESOURCES
        for key, item in wanted.items():
            kind, name = key.split("/", 1)
            resource = resources[kind]
            view = self.owned.get(kind)  # policies not watched: not served (a create 404s)
            stored = None if view is None else view.get(name)
            if stored is None:
                call = functools.partial(self._client.create, resource.path(), item)
                self._send(kind, "create", call)
                continue
            same_labels = (stored["metadata"].get("labels") or {}) == item["metadata"]["labels"]
            body_keys = [k for k in item if k not in ("apiVersion", "kind", "metadata")]
            if same_labels and all(_subset(item[k], stored.get(k)) for k in body_keys):
                continue
            body = {
                **item,
                "metadata": {
                    **item["metadata"],
                    "resourceVersion": stored["metadata"]["resourceVersion"],
                },
            }
            self._send(
                kind, "replace", functools.partial(self._client.replace, resource.path(name), body)
            )
        if self._failed:
            # The new path's objects first, then the old path's deleted: never a moment
            # with neither (a switch of path); the pass is retried with backoff.
            return self.writes - before
        for kind, view in self.owned.items():
            if kind in ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding") and not (
                self.serves_policies
            ):
                continue  # no longer served (a downgrade): nothing left to delete, stale cache
            resource = resources[kind]
            for stored_item in view.items():
                name = stored_item["metadata"]["name"]
                if f"{kind}/{name}" not in wanted and name not in failed:
                    self._send(
                        kind, "delete", functools.partial(self._client.delete, resource.path(name))
                    )
        return self.writes - before

    def _send(self, kind: str, verb: str, call: Callable[[], object]) -> None:
        """One write, counted in the manager's writes_total{kind,verb} (and write_errors)."""
        self.writes += 1
        if self._metrics is not None:
            self._metrics.writes.labels(kind, verb).inc()
        try:
            call()
        except (rest.ApiError, rest.ApiUnavailable) as err:
            if self._metrics is not None:
                self._metrics.write_errors.labels(kind, verb).inc()
            log.warning("%s of a colocation policy failed: %s (retried with backoff)", verb, err)
            if isinstance(err, rest.ApiUnavailable):
                raise  # the rest of the pass would find it unavailable too
            if err.not_found and verb == "delete":
                return  # gone already: what the delete wanted
            if err.not_found and kind != "MutatingWebhookConfiguration":
                self.recheck(force=True)  # the policies may no longer be served
            self._failed += 1

    def _sync(self, _key: str, _since: float | None) -> None:
        """The runtime's sync: one pass; raises when a write failed (retried with backoff)."""
        self.reconcile()
        if self._failed:
            raise controller.Failed(f"{self._failed} colocation policy writes failed")

    def run(self, stop: threading.Event, may_act: Callable[[], bool]) -> None:
        """Pass on every event and resync while `may_act()`, until `stop`."""
        self.runtime.run(stop, may_act)


def _subset(rendered: Any, stored: Any) -> bool:
    """Whether every field we render is in the stored object with the same value (the
    API server adds defaults we do not render)."""
    if isinstance(rendered, Mapping):
        return isinstance(stored, Mapping) and all(
            k in stored and _subset(v, stored[k]) for k, v in rendered.items()
        )
    if isinstance(rendered, list):
        return (
            isinstance(stored, list)
            and len(rendered) == len(stored)
            and all(_subset(a, b) for a, b in zip(rendered, stored, strict=True))
        )
    return bool(rendered == stored)
