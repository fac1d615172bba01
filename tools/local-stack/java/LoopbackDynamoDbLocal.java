// Starts DynamoDB Local listening on 127.0.0.1 only. Its own launcher
// (ServerRunner) binds every interface and has no option to choose one, so
// this builds the same handler chain on a loopback-only Jetty connector.
// Telemetry is never configured, so nothing is sent anywhere.
//
// usage: java -cp 'lib/*:.' LoopbackDynamoDbLocal PORT [DB_PATH]
//   without DB_PATH the database is in memory; with it, it survives restarts.

import com.amazonaws.services.dynamodbv2.local.server.DynamoDBProxyServer;
import com.amazonaws.services.dynamodbv2.local.server.LocalDynamoDBRequestHandler;
import com.amazonaws.services.dynamodbv2.local.server.LocalDynamoDBServerHandler;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public final class LoopbackDynamoDbLocal {
    public static void main(String[] args) throws Exception {
        if (args.length < 1 || args.length > 2) {
            System.err.println("usage: LoopbackDynamoDbLocal PORT [DB_PATH]");
            System.exit(2);
        }
        int port = Integer.parseInt(args[0]);
        String dbPath = args.length == 2 ? args[1] : null;
        boolean inMemory = dbPath == null;
        boolean sharedDb = true; // one database whatever the access key and region
        boolean delayTransientStatuses = false;
        LocalDynamoDBServerHandler handler = new LocalDynamoDBServerHandler(
                new LocalDynamoDBRequestHandler(0, inMemory, dbPath, sharedDb, delayTransientStatuses), null);

        Server server = new Server();
        ServerConnector connector = new ServerConnector(server);
        connector.setHost("127.0.0.1");
        connector.setPort(port);
        server.addConnector(connector);
        server.setHandler(new DynamoDBProxyServer(port, handler).setUpHandler(handler));
        server.start();
        System.out.println("DynamoDB Local listening on 127.0.0.1:" + port + (inMemory ? " (in memory)" : " (" + dbPath + ")"));
        server.join();
    }
}
