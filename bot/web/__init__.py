"""Read-only pages for people and /metrics for machines, served by the bot's own app (issue 21).

``bot.web.pages.web_routes`` gives ``create_app`` the routes when
``web.secret`` is set; ``bot.web.links`` makes and checks the signed link
each review message carries (light: ``status`` imports it alone);
``bot.web.metrics.Metrics`` is the Prometheus registry /metrics exposes.
Nothing is imported here, so importing the links costs no template engine.
"""
