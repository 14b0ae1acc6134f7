"""Ray integrations: batch detection on a cluster (cluster.py) and HTTP serving (serve.py); imported only by the commands that use them."""
