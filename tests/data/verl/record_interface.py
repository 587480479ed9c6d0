"""Re-record interface.json from a verl checkout: the names, signatures and fields of verl's
agent-loop interface that envhub.integrations.verl relies on, read with ``ast`` (verl itself
needs torch and CUDA, and is not imported).

    git clone https://github.com/volcengine/verl && python tests/data/verl/record_interface.py verl

Then run tests/test_integrations_verl.py: a change in any recorded name fails a test there.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

#: (file, class or None, member): what the adapter calls, subclasses or fills in.
WANTED = [
    ("verl/experimental/agent_loop/agent_loop.py", "AgentLoopBase", "__init__"),
    ("verl/experimental/agent_loop/agent_loop.py", "AgentLoopBase", "run"),
    ("verl/experimental/agent_loop/agent_loop.py", "AsyncLLMServerManager", "generate"),
    ("verl/experimental/agent_loop/agent_loop.py", None, "register"),
    ("verl/experimental/agent_loop/tool_parser.py", "ToolParser", "get_tool_parser"),
    ("verl/experimental/agent_loop/tool_parser.py", "ToolParser", "extract_tool_calls"),
]
#: (file, class): pydantic models whose fields the adapter reads or fills.
MODELS = [
    ("verl/experimental/agent_loop/agent_loop.py", "AgentLoopOutput"),
    ("verl/experimental/agent_loop/agent_loop.py", "AgentLoopMetrics"),
    ("verl/workers/rollout/replica.py", "TokenOutput"),
    ("verl/experimental/agent_loop/tool_parser.py", "FunctionCall"),
]


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, Any]:
    args = node.args
    positional = [a.arg for a in [*args.posonlyargs, *args.args]]
    defaults = len(args.defaults)
    return {
        "async": isinstance(node, ast.AsyncFunctionDef),
        "positional": positional,
        "positional_with_defaults": positional[len(positional) - defaults:] if defaults else [],
        "keyword_only": [a.arg for a in args.kwonlyargs],
        "keyword_only_with_defaults": [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                                       if d is not None],
        "var_positional": args.vararg is not None,
        "var_keyword": args.kwarg is not None,
        "returns": ast.unparse(node.returns) if node.returns is not None else None,
    }


def _fields(node: ast.ClassDef) -> dict[str, Any]:
    fields = {}
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            fields[item.target.id] = {"type": ast.unparse(item.annotation), "required": item.value is None}
    return fields


def record(checkout: Path) -> dict[str, Any]:
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    trees = {}
    out: dict[str, Any] = {"repository": "volcengine/verl", "commit": commit, "signatures": {}, "models": {}}
    for path, cls, member in WANTED:
        tree = trees.setdefault(path, ast.parse((checkout / path).read_text()))
        scope = tree.body if cls is None else next(n for n in tree.body
                                                  if isinstance(n, ast.ClassDef) and n.name == cls).body
        node = next(n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == member)
        out["signatures"][f"{path}:{cls + '.' if cls else ''}{member}"] = _signature(node)
    for path, cls in MODELS:
        tree = trees.setdefault(path, ast.parse((checkout / path).read_text()))
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        out["models"][f"{path}:{cls}"] = _fields(node)
    return out


if __name__ == "__main__":
    recorded = record(Path(sys.argv[1]))
    here = Path(__file__).with_name("interface.json")
    previous = json.loads(here.read_text()) if here.exists() else {}
    recorded = {**previous, **recorded}  # keeps the hand-written "calls" section
    here.write_text(json.dumps(recorded, indent=2) + "\n")
    print(f"recorded verl {recorded['commit']} into {here}")
