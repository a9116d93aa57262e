"""The memory page: `/ui` on the daemon, server-rendered from Jinja2 templates and one stylesheet shipped in the
package (no build step, no script, nothing from another site), behind the API's keys.

`routes` (the pages) over `sections` (the agent page's parts, the list a new part joins) over `views` (what each
part reads of an agent); `pages` renders and escapes, `session` keeps the key in an HttpOnly cookie and the forms
from other sites. See docs/pages/guide/memory-page.md.
"""
