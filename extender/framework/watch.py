"""`Watches`: the list-watch caches plugins subscribe to through `Handle.watch`, built once.

One informer per (resource, field selector): a plugin alone on it gets the
informer's projection and events directly (LoadAwareScheduling's three caches
cost what they cost before plugins existed); two plugins on it share it, each
object projected once per plugin, and one plugin's projection or handler
failing costs that plugin the object, not the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kube import cache, rest

log = logging.getLogger(__name__)

_SKIP = object()  # a subscriber's projection failed for this object


@dataclass(frozen=True, slots=True)
class _Subscriber:
    project: Callable[[Mapping[str, Any]], Any]
    on_event: Callable[[str, Any, Any], None]


class Watches:
    """Subscriptions collected while plugins are built; `informers()` then makes the caches."""

    def __init__(self) -> None:
        self._subscribers: dict[tuple[cache.Resource, str | None], list[_Subscriber]] = {}

    def subscribe(
        self,
        resource: cache.Resource,
        project: Callable[[Mapping[str, Any]], Any],
        on_event: Callable[[str, Any, Any], None],
        field_selector: str | None = None,
    ) -> None:
        key = (resource, field_selector)
        self._subscribers.setdefault(key, []).append(_Subscriber(project, on_event))

    def informers(self, client: rest.Rest, *, page_size: int = 500) -> list[cache.Informer[Any]]:
        """One informer per subscribed resource and selector (not started)."""
        found: list[cache.Informer[Any]] = []
        for (resource, selector), subscribers in self._subscribers.items():
            if len(subscribers) == 1:
                project, on_event = subscribers[0].project, subscribers[0].on_event
            else:
                project, on_event = _fan_out(subscribers)
            name = resource.plural if selector is None else f"{resource.plural} ({selector})"
            found.append(
                cache.Informer(
                    client,
                    resource,
                    project=project,
                    on_event=on_event,
                    page_size=page_size,
                    field_selector=selector,
                    name=name,
                )
            )
        return found


def _fan_out(
    subscribers: list[_Subscriber],
) -> tuple[Callable[[Mapping[str, Any]], tuple[Any, ...]], Callable[[str, Any, Any], None]]:
    def project(raw: Mapping[str, Any]) -> tuple[Any, ...]:
        out = []
        for subscriber in subscribers:
            try:
                out.append(subscriber.project(raw))
            except Exception as err:  # one plugin's projection must not cost the others the object
                log.debug("projection by %s left an object out: %s", subscriber.project, err)
                out.append(_SKIP)
        return tuple(out)

    def on_event(kind: str, old: tuple[Any, ...] | None, new: tuple[Any, ...] | None) -> None:
        for index, subscriber in enumerate(subscribers):
            before = None if old is None or old[index] is _SKIP else old[index]
            after = None if new is None or new[index] is _SKIP else new[index]
            if before is None and after is None:
                continue
            try:
                subscriber.on_event(kind, before, after)
            except Exception:  # isolate plugins from each other, as the runner does
                log.exception("event handler %s failed", subscriber.on_event)

    return project, on_event
