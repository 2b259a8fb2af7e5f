"""Before a run: `perfmodel probe` measures a few real steps of the user's workload on this machine
and lets the model carry only what differs (`probe`, sizes in `plan`, intervals in `combine`).
After a run: `perfmodel.ingest` turns it into feature-table rows."""
