"""Files that fit in a head: no module in src/ over 500 lines, no function over 60."""
import ast

from helpers import REPO

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 60


def test_no_file_over_500_lines_and_no_function_over_60():
    too_long = []
    for path in sorted((REPO / "src").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(REPO)
        if len(text.splitlines()) > MAX_FILE_LINES:
            too_long.append(f"{rel}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    too_long.append(f"{rel}:{node.lineno} {node.name}: {n} lines")
    assert not too_long, too_long
