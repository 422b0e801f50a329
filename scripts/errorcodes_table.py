"""Print the README's "Error codes" table from cockpit.errorcodes (the one source of the codes)."""

from cockpit.errorcodes import CODES

print("| code | meaning | remedy |")
print("|---|---|---|")
for c in CODES.values():
    remedy = c.remedy.replace("|", "\\|")
    print(f"| `{c.code}` | {c.meaning} | {remedy} |")
