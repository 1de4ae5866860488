"""kubernetes-asyncio clients built from one of the control plane's kubeconfigs."""
from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any


@contextlib.asynccontextmanager
async def api_client(kubeconfig: str | Path) -> AsyncIterator[Any]:
    """An ``ApiClient`` authenticated as that kubeconfig's user, closed on exit."""
    from kubernetes_asyncio import client, config  # heavy: imported only when a test asks

    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig),
                                  client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        yield api
