"""The operator's pages: the home redirect, the loops dashboard and each loop's page (docs/web.md).

One module per page; the judgement behind the dashboard's badges is in ``ops.web.badges``.
"""
