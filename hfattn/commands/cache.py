"""``hfattn cache list`` and ``hfattn cache remove NAME... | --all``: the folders of the
prepared-data cache (:mod:`hfattn.data.prepared`), listed or removed. Imports neither torch nor
the data libraries."""

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
            "`list` shows every prepared folder (name, task, data, size, when it was made); "
            "`remove NAME...` deletes the folders named, `remove --all` every one. A run whose "
            "data was removed prepares it again."
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
    from ..data import prepared

    root = prepared.prepared_root()
    if args.action == "list":
        if args.names or args.all:
            return report_error("cache list takes no NAME and no --all")
        _print_list(root)
        return 0
    if bool(args.names) == args.all:
        return report_error("cache remove takes the NAMEs to remove, or --all (not both)")
    rows = prepared.list_prepared(root)
    try:
        removed = prepared.remove_prepared(
            [r["name"] for r in rows] if args.all else args.names, root
        )
    except ValueError as err:
        return report_error(err)
    stale = prepared.remove_stale(root) if args.all else []
    for folder in removed:
        print(f"removed {folder}")
    for folder in stale:
        print(f"removed {folder} (left by a preparation cut short)")
    if not removed and not stale:  # --all on an empty cache
        print(f"no prepared data in {root}")
    return 0


def _print_list(root) -> None:
    """The table of ``hfattn cache list``, and a line on the folders left aside."""
    from ..data.prepared import folder_size, human_size, list_prepared, stale_folders

    rows = list_prepared(root)
    if not rows:
        print(f"no prepared data in {root}")
    else:
        print(f"prepared data in {root}:")
        print_columns(
            ("name", "task", "size", "created", "what"),
            [(row["name"], row.get("task", ""), human_size(row["size"]),
              row.get("created", "")[:16].replace("T", " "), row.get("what", ""))
             for row in rows],
        )  # fmt: skip
    stale = stale_folders(root)
    if stale:
        size = human_size(sum(folder_size(folder) for folder in stale))
        print(
            f"and {len(stale)} folder(s) set aside by preparations under way or cut short "
            f"({size}): `hfattn cache remove --all` deletes those no process works on"
        )
