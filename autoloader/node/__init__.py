"""autoloader.node"""
