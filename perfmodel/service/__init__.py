"""The prediction service: `perfmodel serve`, an HTTP API, a web page, and the learned model
followed from the MLflow registry.

Modules:
  settings      - `ServiceSettings`: limits and where the model comes from
  model_source  - `FixedModel` (a model folder) and `RegistryFollower` (a registry alias, polled,
                  switched in the background); both hand out an immutable `LoadedModel`
  requests      - request bodies (JSON or YAML), their one-line errors, and the refusal of
                  server-side paths
  app           - `create_app(settings)`: the FastAPI application and its routes
  static/       - the web page (plain HTML, CSS and a script; no build step, no CDN)

Nothing is imported here: FastAPI, uvicorn and MLflow load only when a server is created.
"""
