"""The measuring kernel: what both the collectors (`collectors/`, many configurations per host) and
the probe (`perfmodel.run.probe`, a few steps of the user's own run) measure with.

    fingerprint - who measures: the host's accelerators, CPU, memory and software (`hardware_id`)
    device      - the device a measurement runs on: synchronisation, peak memory, OOM tests
    configs     - one training-slice configuration (torch-free), its row id and feature-row fields
    models      - real models built from dimensions in plain PyTorch (imports torch)
    slices      - build a slice, warm up, time >= 10 steps, make the measured row
    storage     - the parquet shards and fingerprints in the collectors' folder, and
                  `measured_hosts` (how the catalog reads what a host measured)

Importing this package imports nothing; `models` (and what builds models) loads torch.
"""
