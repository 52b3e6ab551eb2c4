# The key is read where the chain is verified (threads.selectors.integrity); services that
# hash what they write import it from here.
from threads.selectors.integrity import chain_key

__all__ = ["chain_key"]
