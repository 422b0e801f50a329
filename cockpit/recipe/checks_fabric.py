"""Fabric preflight checks: the fabric IP on its interface, RDMA link and port state, the RoCE v2 GID
index, and reachability of every peer's fabric IP from every host (recipe step 1)."""

from __future__ import annotations

from cockpit.config import ClusterConfig
from cockpit.hosts.shell import Cmd, tcp_probe
from cockpit.recipe import parsers
from cockpit.recipe.checks import Check, Outcome, Probe, Verdict, ranks_text

NUM_GIDS = 16
NO_NET_CHANGES = "the cockpit never changes networking: ask the host administrator"


def _first(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "no output")[:160]


# ---- fabric IP ---------------------------------------------------------------------------------------


def _fabric_ip(p: Probe) -> Outcome:
    ip, want = p.host.fabric_ip, p.host.fabric_iface
    ifaces = parsers.parse_ip_addr(p.output("ip.addr"))
    if not ifaces:
        return Outcome(Verdict.UNKNOWN, _first(p.output("ip.addr")), "run `ip -j addr` on the host")
    holder = parsers.iface_with_ip(ifaces, ip)
    if holder is None:
        return Outcome(Verdict.FAIL, f"{ip} is on no interface",
                       f"configure {ip} on {want} ({NO_NET_CHANGES}), or fix fabric_ip for rank {p.rank}")
    plen = next((a.prefixlen for a in holder.addrs if a.local == ip), None)
    value = f"{ip}/{plen} on {holder.name} ({holder.operstate or '?'})"
    if holder.name != want:
        return Outcome(Verdict.FAIL, f"{value}, not on {want}",
                       f"set fabric_iface = \"{holder.name}\" for rank {p.rank} in cluster.toml, or move the "
                       f"address ({NO_NET_CHANGES})")
    if not holder.up:
        return Outcome(Verdict.FAIL, value, f"{want} is down: {NO_NET_CHANGES}")
    return Outcome(Verdict.PASS, value)


FABRIC_IP = Check("fabric-ip", 1, "fabric IP on the fabric interface",
                  lambda cfg, r: {"ip.addr": ["ip", "-j", "addr", "show"]}, _fabric_ip)


# ---- RDMA link ---------------------------------------------------------------------------------------


NO_KERNEL_RDMA = ("the kernel has no RDMA support loaded (the `rdma` tool is installed; its netlink "
                  "family is missing): load the HCA's RDMA drivers (`lsmod | grep -E 'ib_core|mlx5_ib'`; "
                  "`sudo modprobe mlx5_ib`) or install the vendor's driver stack — host administrator")
NO_RDMA_DEVICES = ("the kernel reports no RDMA device: the HCA's RDMA driver is not bound (`lsmod | grep "
                   "mlx5_ib`, `ibdev2netdev`) — host administrator")


def rdma_tool_remedy(status: int | None, output: str) -> tuple[Verdict, str]:
    """Verdict and remedy when `rdma link` gave no links: the tool missing (127), the kernel without RDMA
    (`Failed to open NETLINK_RDMA socket`), no device, or an error to read."""
    if status == 127:
        return Verdict.FAIL, "install iproute2's `rdma` tool (host administrator)"
    if "netlink_rdma" in output.lower():
        return Verdict.FAIL, NO_KERNEL_RDMA
    if status == 0:
        return Verdict.FAIL, NO_RDMA_DEVICES
    return Verdict.UNKNOWN, "run `rdma -j link show` on the host and read its error (host administrator)"


def _rdma_link(p: Probe) -> Outcome:
    links = parsers.parse_rdma_links(p.output("rdma.link"))
    if p.status("rdma.link") != 0 or not links:
        verdict, remedy = rdma_tool_remedy(p.status("rdma.link"), p.output("rdma.link"))
        return Outcome(verdict, _first(p.output("rdma.link")), remedy)
    parts, bad, drives_fabric = [], [], False
    for hca in p.host.ib_hca:
        link = next((lk for lk in links if lk.ifname == hca and lk.port in (1, None)), None)
        if link is None:
            parts.append(f"{hca}: not found")
            bad.append(hca)
            continue
        parts.append(f"{hca}/1 {link.state} {link.physical_state} → {link.netdev}")
        drives_fabric |= link.netdev == p.host.fabric_iface
        if link.state != "ACTIVE" or link.physical_state != "LINK_UP":
            bad.append(hca)
    value = "; ".join(parts)
    known = ", ".join(lk.ifname for lk in links)
    if bad:
        return Outcome(Verdict.FAIL, value,
                       f"bring {', '.join(bad)} up (cabling, switch port; `ibdev2netdev`) — "
                       f"{NO_NET_CHANGES}; HCAs on this host: {known}")
    if not drives_fabric:
        return Outcome(Verdict.WARN, f"{value}; none drives {p.host.fabric_iface}",
                       f"NCCL_IB_HCA should be the HCA of {p.host.fabric_iface} (see `ibdev2netdev`): "
                       f"fix ib_hca for rank {p.rank}")
    return Outcome(Verdict.PASS, value)


RDMA_LINK = Check("rdma-link", 1, "RDMA link ACTIVE / LINK_UP",
                  lambda cfg, r: {"rdma.link": ["rdma", "-j", "link", "show"]}, _rdma_link)


def _ibv_cmds(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    return {f"ibv.{hca}": ["ibv_devinfo", "-d", hca] for hca in cfg.host(rank).ib_hca}


def _ibv_port(p: Probe) -> Outcome:
    parts, bad = [], []
    for hca in p.host.ib_hca:
        devs = {d.hca_id: d for d in parsers.parse_ibv_devinfo(p.output(f"ibv.{hca}"))}
        port = devs[hca].ports.get(1) if hca in devs else None
        if port is None:
            parts.append(f"{hca}: {_first(p.output(f'ibv.{hca}'))}")
            bad.append(hca)
            continue
        parts.append(f"{hca} port 1 {port.state}, {port.link_layer}, mtu {port.active_mtu}")
        if port.state != "PORT_ACTIVE" or port.link_layer != "Ethernet":
            bad.append(hca)
    outputs = " ".join(p.output(f"ibv.{hca}") for hca in bad).lower()
    if bad and "failed to get ib devices list" in outputs:
        return Outcome(Verdict.FAIL, "; ".join(parts), NO_KERNEL_RDMA)
    if bad:
        return Outcome(Verdict.FAIL, "; ".join(parts),
                       f"the RoCE port must be PORT_ACTIVE with link_layer Ethernet on {', '.join(bad)}: "
                       f"check cabling and the port mode (`ibv_devinfo`) — {NO_NET_CHANGES}")
    return Outcome(Verdict.PASS, "; ".join(parts))


IBV_PORT = Check("ibv-port", 1, "RoCE port PORT_ACTIVE, Ethernet", _ibv_cmds, _ibv_port)


# ---- GID index ---------------------------------------------------------------------------------------


def _port_dir(hca: str) -> str:
    return f"/sys/class/infiniband/{hca}/ports/1"


def _gid_cmds(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    paths = []
    for hca in cfg.host(rank).ib_hca:
        d = _port_dir(hca)
        for n in range(NUM_GIDS):
            paths += [f"{d}/gids/{n}", f"{d}/gid_attrs/types/{n}", f"{d}/gid_attrs/ndevs/{n}"]
    return {"gids": ["head", "-v", "-n", "1", "--", *paths]}


def right_gid(entries: list[parsers.GidEntry], ip: str) -> parsers.GidEntry | None:
    return next((e for e in entries if e.type == "RoCE v2" and e.ipv4 == ip), None)


def _gid(p: Probe) -> Outcome:
    values = parsers.parse_head_verbose(p.output("gids"))
    ip, idx = p.host.fabric_ip, p.host.gid_index
    if not values:
        return Outcome(Verdict.UNKNOWN, _first(p.output("gids")), "read the GID table in sysfs on the host")
    parts, fixes, bad = [], [], False
    for hca in p.host.ib_hca:
        entries = parsers.gid_table(values, _port_dir(hca), NUM_GIDS)
        at = next((e for e in entries if e.index == idx), None)
        good = right_gid(entries, ip)
        if at is not None and at.type == "RoCE v2" and at.ipv4 == ip:
            parts.append(f"{hca} GID {idx}: RoCE v2 {ip} on {at.ndev}")
            continue
        bad = True
        seen = f"{at.type} {at.ipv4 or at.gid}" if at else "unused"
        parts.append(f"{hca} GID {idx}: {seen}")
        if good is not None:
            fixes.append(f"index {good.index} on {hca}")
    if not bad:
        return Outcome(Verdict.PASS, "; ".join(parts))
    if fixes:
        suggestion = fixes[0].split()[1]
        return Outcome(Verdict.FAIL, "; ".join(parts) + f" — RoCE v2 {ip} is {', '.join(fixes)}",
                       f"set gid_index = {suggestion} for rank {p.rank} in cluster.toml (NCCL_IB_GID_INDEX)")
    return Outcome(Verdict.FAIL, "; ".join(parts) + f" — no RoCE v2 GID carries {ip}",
                   f"check that {', '.join(p.host.ib_hca)} drives {p.host.fabric_iface} (`ibdev2netdev`) and "
                   f"that {ip} is configured there — {NO_NET_CHANGES}")


GID = Check("gid", 1, "GID index is RoCE v2 with the fabric IP", _gid_cmds, _gid)


# ---- reachability across hosts -----------------------------------------------------------------------
#
# Each host opens a TCP connection to every peer's fabric IP on the coordination port, from the host
# itself. An accepted or *refused* connection proves the address answers (its kernel sent the reset);
# a timeout or "no route" does not. Attribution: a failed pair A→B counts against B when A reached at
# least one other peer (A's own fabric works), and against A when A reached nobody at all.


def _reach_cmds(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    return {f"reach.{h.rank}": tcp_probe(h.fabric_ip, cfg.cluster.coord_port, timeout_s=3)
            for h in cfg.by_rank() if h.rank != rank}


def _reach(p: Probe) -> Outcome:
    seen = {}
    for h in p.cfg.by_rank():
        if h.rank != p.rank and f"reach.{h.rank}" in p.sections:
            s = p.sections[f"reach.{h.rank}"]
            seen[h.rank] = parsers.parse_tcp_probe(s.status, s.output)
    ok = sorted(r for r, v in seen.items() if v in ("open", "refused"))
    value = f"reaches rank {ranks_text(ok)}" if ok else "reaches no peer"
    return Outcome(Verdict.PASS if len(ok) == len(seen) else Verdict.FAIL, value, facts={"reach": seen})


def _compare_reach(cfg: ClusterConfig, outcomes: dict[int, Outcome]) -> dict[int, Outcome]:
    seen: dict[int, dict[int, str]] = {r: dict(o.facts.get("reach") or {}) for r, o in outcomes.items()}
    healthy = {a for a, probes in seen.items() if any(v in ("open", "refused") for v in probes.values())}
    ips = {h.rank: h.fabric_ip for h in cfg.hosts}
    remedy = ("check the fabric link, cabling and addresses between these hosts (the coordination port "
              f"{cfg.cluster.coord_port} must be reachable) — {NO_NET_CHANGES}")
    changed = {}
    for rank in outcomes:
        from_peers = {a: probes[rank] for a, probes in seen.items() if rank in probes}
        against = sorted(a for a, v in from_peers.items() if v not in ("open", "refused") and a in healthy)
        reached_by = sorted(a for a, v in from_peers.items() if v in ("open", "refused"))
        own = seen.get(rank, {})
        blind = bool(own) and rank not in healthy
        if against:
            how = ", ".join(f"{from_peers[a]} from {a}" for a in against)
            changed[rank] = Outcome(Verdict.FAIL, f"{ips[rank]} not reachable ({how})", remedy)
        elif blind:
            changed[rank] = Outcome(Verdict.FAIL, f"reaches no peer ({', '.join(sorted(set(own.values())))})",
                                    remedy)
        else:
            # The same words for every rank reached by all its peers, so that grouped rows never show one
            # rank's address and peers for the others ("10.0.0.1 reached by rank 1-3 (rank 0; others alike)").
            if reached_by and len(reached_by) == len(from_peers):
                text = ("reached by every peer" if len(from_peers) == len(cfg.hosts) - 1
                        else "reached by every peer that could probe it")
            elif reached_by:
                text = f"{ips[rank]} reached by rank {ranks_text(reached_by)}"
            else:
                text = f"{ips[rank]} no peer could probe it"
            changed[rank] = Outcome(Verdict.PASS if reached_by or not own else Verdict.UNKNOWN,
                                    text, "" if reached_by else remedy)
    return changed


REACH = Check("reach", 1, "fabric IP reachable from every peer", _reach_cmds, _reach, compare=_compare_reach,
              own_channels=True, after_compare_only=True, applies=lambda cfg, r: len(cfg.hosts) > 1)
