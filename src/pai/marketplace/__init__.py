"""The marketplace: job templates (and data templates) users publish for others to find, star
and run, with the fields of OpenPAI's marketplace (openpaimarketplace).

- `items`: who sees and changes which item, publishing with the job checked and its secrets
  masked, searching, stars, and counting runs; every change in the audit log.
- `builtin`: the example jobs shipped with PAI, present as items from the first start.
- `markdown`: descriptions rendered as safe HTML.
"""
