"""Politeness groups: hosts on one IP address (shared hosting) or of one registered domain (a wildcard
subdomain farm) share a group, and a group has its own concurrency: one request in flight by default,
as Heritrix and Nutch do per IP. A host alone in its group is limited by its own concurrency only.
"""

from __future__ import annotations

from collections import Counter

from graph.hostnames import registered_domain
from scheduler.lease import Lease


def domain_group(host: str) -> str:
    # the PSL's private section too: blogs of one platform (x.blogspot.com) are separate sites
    return "domain:" + registered_domain(host, include_private=True)


class PolitenessGroups:
    def __init__(self, limit: int) -> None:
        self.limit = limit  # requests in flight per group; 0 = groups are not limited
        # group -> its hosts (a list: most groups have one host, and a one-item set takes 216 bytes)
        self.members: dict[str, list[str]] = {}
        self.of: dict[str, tuple[str, ...]] = {}  # host -> its groups
        self.busy: Counter[str] = Counter()
        self.out: dict[str, list[Lease]] = {}  # host -> its leases in flight

    def add_host(self, host: str) -> None:
        if host not in self.of:
            self.of[host] = ()
            self.join(host, domain_group(host))

    def join(self, host: str, group: str) -> None:
        """`host` belongs to `group` (e.g. `ip:203.0.113.7`); its requests in flight count there now."""
        groups = self.of.get(host, ())
        if group in groups:
            return
        self.of[host] = (*groups, group)
        self.members.setdefault(group, []).append(host)  # once: `host` was not in it
        for lease in self.out.get(host, ()):
            lease.groups += (group,)
            self.busy[group] += 1

    def shared(self, group: str) -> bool:
        return len(self.members.get(group, ())) > 1

    def free(self, host: str) -> bool:
        """No group of the host is at its limit."""
        if not self.limit:
            return True
        return all(self.busy[g] < self.limit for g in self.of.get(host, ()) if self.shared(g))

    def take(self, lease: Lease) -> None:
        lease.groups = tuple(self.of.get(lease.host, ()))
        for group in lease.groups:
            self.busy[group] += 1
        self.out.setdefault(lease.host, []).append(lease)

    def release(self, lease: Lease) -> set[str]:
        """The lease is done; returns the other hosts of its shared groups (one of them may go now)."""
        out = self.out.get(lease.host, [])
        if lease in out:
            out.remove(lease)
        if not out:
            self.out.pop(lease.host, None)  # a frontier of a million hosts keeps no list for each
        waiting: set[str] = set()
        for group in lease.groups:
            self.busy[group] -= 1
            if self.busy[group] <= 0:
                del self.busy[group]
            if self.shared(group):
                waiting.update(self.members[group])
        waiting.discard(lease.host)
        return waiting
