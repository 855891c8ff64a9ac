"""``hfattn cache list`` and ``hfattn cache remove NAME... | --stale | --all``: the folders of
the prepared-data cache (:mod:`hfattn.data.prepared_cache`), listed (the ones no recipe would
reuse marked stale) or removed. Imports neither torch nor the data libraries."""

from __future__ import annotations

import argparse

from .inputs import report_error

ACTIONS = ("list", "remove")


def register(subparsers) -> None:
    """Add the ``cache`` sub-command."""
    parser = subparsers.add_parser(
        "cache",
        help="list or remove prepared data",
        description=(
            "The prepared-data cache ($HFATTN_PREPARED_DIR, else $HF_HOME/hfattn/prepared): "
            "`list` shows every prepared folder (name, task, size, when it was made, whether it "
            "is stale, the data) and marks stale the ones no recipe would reuse (their local "
            "source changed or is gone); `remove NAME...` deletes the folders named, "
            "`remove --stale` the stale ones, `remove --all` every one. A run whose data was "
            "removed prepares it again."
        ),
    )
    parser.add_argument("action", choices=ACTIONS, help="list or remove")
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="with remove: the prepared folders to delete, by the names `hfattn cache list` shows",
    )
    parser.add_argument(
        "--stale",
        action="store_true",
        help="with remove: delete the prepared folders `hfattn cache list` marks stale",
    )
    parser.add_argument(
        "--all", action="store_true", help="with remove: delete every prepared folder"
    )
    parser.set_defaults(func=run)


def print_columns(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """Print ``rows`` under ``header`` in left-aligned columns two spaces apart, never cut or
    wrapped (a name is copied from it into ``hfattn cache remove``)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [tuple(h.upper() for h in header), *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def run(args: argparse.Namespace) -> int:
    """List the prepared folders as a table, or remove the ones named (or all)."""
    from ..data import prepared_cache
    from ..data.prepared import prepared_root

    root = prepared_root()
    if args.action == "list":
        if args.names or args.all or args.stale:
            return report_error("cache list takes no NAME, no --stale and no --all")
        _print_list(root)
        return 0
    if [bool(args.names), args.stale, args.all].count(True) != 1:
        return report_error("cache remove takes the NAMEs to remove, --stale or --all: one of them")
    rows = prepared_cache.list_prepared(root)
    if args.all or args.stale:
        names = [r["name"] for r in rows if args.all or r["stale"]]
    else:
        names = args.names
    try:
        removed = prepared_cache.remove_prepared(names, root)
    except ValueError as err:
        return report_error(err)
    aside = prepared_cache.remove_aside(root) if args.all else []
    for folder in removed:
        print(f"removed {folder}")
    for folder in aside:
        print(f"removed {folder} (left by a preparation cut short)")
    if not removed and not aside:  # --all on an empty cache, --stale with none stale
        print(f"no {'stale ' if args.stale else ''}prepared data in {root}")
    return 0


def _print_list(root) -> None:
    """The table of ``hfattn cache list`` (the stale folders marked, and a line on how to
    remove them), and a line on the folders left aside."""
    from ..data.prepared import folder_size, human_size
    from ..data.prepared_cache import folders_aside, list_prepared

    rows = list_prepared(root)
    if not rows:
        print(f"no prepared data in {root}")
    else:
        print(f"prepared data in {root}:")
        print_columns(
            ("name", "task", "size", "created", "state", "what"),
            [(row["name"], row.get("task", ""), human_size(row["size"]),
              row.get("created", "")[:16].replace("T", " "),
              f"stale: {row['stale']}" if row["stale"] else "", row.get("what", ""))
             for row in rows],
        )  # fmt: skip
    stale = [row for row in rows if row["stale"]]
    if stale:
        size = human_size(sum(row["size"] for row in stale))
        print(
            f"{len(stale)} stale folder(s) ({size}) that no recipe would reuse: "
            "`hfattn cache remove --stale` deletes them (`hfattn cache remove NAME` one)"
        )
    aside = folders_aside(root)
    if aside:
        size = human_size(sum(folder_size(folder) for folder in aside))
        print(
            f"and {len(aside)} folder(s) set aside by preparations under way or cut short "
            f"({size}): `hfattn cache remove --all` deletes those no process works on"
        )
